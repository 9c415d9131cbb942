"""The MCP rules an earlier robotad took, left out of stored state (decisions 73 and 81)."""

from __future__ import annotations

from robotad.daemon.inert_rules import LeftOut, as_given, kept_rules

WHERE = "$.artifact.record.settings.permissions"


def test_the_rules_an_earlier_robotad_took_are_kept_out_in_their_order() -> None:
    """`kept_rules` keeps every other rule, malformed ones too (those are refused where the
    rules are parsed), and says which it left out, where each was."""
    kept, left_out = kept_rules(
        {"allow": ["Mcp__a", "Read", "Read("], "deny": ["mcp__a__b(x)", "mcp__a", "MCP__b"]}
    )
    assert kept == {"allow": ["Read", "Read("], "ask": [], "deny": ["mcp__a"]}
    assert [(rule.kind, rule.index, rule.text) for rule in left_out] == [
        ("allow", 0, "Mcp__a"),
        ("deny", 0, "mcp__a__b(x)"),
        ("deny", 2, "MCP__b"),
    ]
    assert left_out[1].refusal.startswith("MCP tools take no argument pattern")


def test_a_refusal_of_the_rules_kept_is_located_among_the_rules_given() -> None:
    """A kept rule's issue is moved past every rule left out before it, of its own kind
    only; an issue elsewhere in the record is kept as it is."""
    left_out = [LeftOut("deny", 0, "Mcp__a", ""), LeftOut("deny", 2, "MCP__b", "")]
    left_out.append(LeftOut("allow", 5, "Mcp__c", ""))
    issues = as_given(
        [
            {"path": f"{WHERE}.deny[0]", "message": "first kept"},
            {"path": f"{WHERE}.deny[1]", "message": "second kept"},
            {"path": f"{WHERE}.allow[1]", "message": "allow"},
            {"path": "$.artifact.record.settings.provider", "message": "elsewhere"},
        ],
        WHERE,
        left_out,
    )
    assert [issue["path"] for issue in issues] == [
        f"{WHERE}.deny[1]",
        f"{WHERE}.deny[3]",
        f"{WHERE}.allow[1]",
        "$.artifact.record.settings.provider",
    ]
    assert [issue["message"] for issue in issues] == [
        "first kept",
        "second kept",
        "allow",
        "elsewhere",
    ]
