"""Compound commands, critical removals and protected paths (what needs a person, G-122)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.session.permissions.hazards import ProtectedPaths, is_critical_removal
from robotad.session.permissions.program_options import writes_or_runs
from robotad.session.permissions.shell_text import command_spellings, split_compound

CWD = "/work/proj"
HOME = "/home/me"


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        ("git status", ["git status"]),
        ("git status && rm -rf /", ["git status", "rm -rf /"]),
        ("a; b || c | d & e\nf", ["a", "b", "c", "d", "e", "f"]),
        ("ls 2>&1 | grep x", ["ls 2>&1", "grep x"]),
        ("cmd &> log", ["cmd &> log"]),
        ("echo 'a; b' \"c && d\"", ["echo 'a; b' \"c && d\""]),
        ("echo a\\;b", ["echo a\\;b"]),
        ("echo '$(literal)'", ["echo '$(literal)'"]),
        ("echo $(rm -rf /)", None),
        ('echo "$(rm -rf /)"', None),
        ("echo `id`", None),
        ("diff <(ls a) <(ls b)", None),
        # A quote inside a comment, $'…' or a here-document never joins the next lines into
        # one part that a prefix rule would admit whole.
        ("git status # don't mind me\nrm victim", ["git status", "rm victim"]),
        ("echo $'a\\'b'\ntouch P1", ["echo $'a\\'b'", "touch P1"]),
        ("cat <<EOF\ncat it's\nEOF\ntouch P2", None),
        ("cat <<< 'x y'", ["cat <<< 'x y'"]),
        ("ls; echo 'unclosed", None),
        ("echo $((1 > 0)); ls", ["echo $((1 > 0))", "ls"]),  # arithmetic is no substitution
        ("echo $(( $(rm x) ))", None),
    ],
)
def test_split_compound(command: str, parts: list[str] | None) -> None:
    """G-122: commands are cut at control operators outside quotes; substitution is opaque;
    a comment is dropped; what cannot be read to its end has no parts."""
    assert split_compound(command) == parts


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf /*",
        "rm -rf ~",
        "rm -rf ~/",
        "rm -rf ~/*",
        "rm -rf .",
        "rm -rf ./*",
        "rm -rf *",
        "rm -rf .*",
        "rm -rf ..",
        "rm -rf ../*",
        "rm -rf /work/proj",
        "rm -rf /work",
        "rm -rf /etc",
        'rm -rf "$HOME"',
        "rm -rf ~other",
        "sudo rm -rf --no-preserve-root /",
        "/bin/rm -fr /usr",
        "FOO=1 rm -r /var",
        "ls && rm -rf ~",
        "echo 'unbalanced",
        "rm -rf a#b /",  # a # inside a word starts no comment
    ],
)
def test_critical_removals(command: str) -> None:
    """G-122: rm of a broad target (root, home, cwd, an ancestor, a wildcard over one of them,
    a variable) is a critical removal; unreadable quoting counts as one."""
    assert is_critical_removal(command, CWD, HOME)


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "rm -rf build/*",
        "rm -f /work/proj/src/a.py",
        "rm -- -odd-name",
        "echo rm -rf /",
        "git rm -r --cached .",
        "ls -la /",
    ],
)
def test_ordinary_removals_are_not_critical(command: str) -> None:
    """G-122: narrow removals and commands merely mentioning rm are not critical."""
    assert not is_critical_removal(command, CWD, HOME)


def test_protected_paths() -> None:
    """G-122: .git, shell start-up files, ~/.ssh and the config directory are protected."""
    protected = ProtectedPaths.default(home=HOME, config_dir="/cfg/robota")
    for path in (
        "/work/proj/.git",
        "/work/proj/.git/config",
        "/work/proj/sub/.git/hooks/pre-commit",
        "/home/me/.bashrc",
        "/work/proj/.zshrc",
        "/home/me/.ssh/authorized_keys",
        "/cfg/robota/config.toml",
    ):
        assert protected.covers(path), path
    for path in ("/work/proj/.gitignore", "/work/proj/.github/x", "/home/me/.sshx", "/cfg/r"):
        assert not protected.covers(path), path


def test_commands_touching_protected_paths() -> None:
    """G-122: a command naming a protected path, even through a redirection, touches it."""
    protected = ProtectedPaths.default(home=HOME, config_dir="/cfg/robota")
    assert protected.touched_by("echo x >> ~/.bashrc", CWD)
    assert protected.touched_by("cat .git/config", CWD)
    assert protected.touched_by("cp key --target-directory=/home/me/.ssh", CWD)
    assert protected.touched_by("echo 'open", CWD)
    assert protected.touched_by("cat a#b ~/.ssh/id_rsa", CWD)
    assert not protected.touched_by("git commit -m 'fix .git handling'", CWD)
    assert not protected.touched_by("ls src", CWD)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_readers_never_raise(command: str) -> None:
    """G-122: arbitrary command text is judged, never crashes the gate; what the splitter
    answers is a list of non-empty, stripped parts or None (opaque)."""
    parts = split_compound(command)
    assert parts is None or all(part and part == part.strip() for part in parts)
    assert isinstance(is_critical_removal(command, CWD, HOME), bool)
    ProtectedPaths.default(home=HOME).touched_by(command, CWD)


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./", min_size=1, max_size=8)
_SIMPLE = (
    st.lists(_WORD, min_size=1, max_size=3).map(" ".join).filter(lambda c: not c.startswith("rm"))
)
_OPERATOR = st.sampled_from([" && ", " || ", "; ", " | ", " & ", "\n"])


@given(st.lists(_SIMPLE, min_size=1, max_size=4), _OPERATOR)
def test_every_part_of_a_compound_is_seen(commands: list[str], operator: str) -> None:
    """G-122: simple commands joined by any control operator come back as exactly those
    commands, and a critical removal hidden behind any of them is still critical."""
    joined = operator.join(commands)
    assert split_compound(joined) == commands
    assert not is_critical_removal(joined, CWD, HOME)
    assert is_critical_removal(f"{joined}{operator}rm -rf /", CWD, HOME)


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("echo x >> ~/.bashrc", True),
        ("git status > ~/.bashrc", True),
        ("cmd &> log", True),
        ("cmd >| out", True),
        ("ls 2> errors.txt", True),
        ("cmd >&file", True),
        ("cat <> f", True),
        ("echo x>f", True),
        ('echo x > "unclosed', True),
        ("ls 2>&1", False),
        ("ls >/dev/null 2>&1", False),
        ("ls >&2", False),
        ("exec 3>&-", False),
        ("ls > '/dev/null'", False),
        ("echo 'a > b' \"c >> d\"", False),
        ("echo a\\>b", False),
        ("sort < in.txt", False),
        ("cat <<EOF", False),
        ("ls # > x", False),  # a comment
        ("echo $((1 > 0))", False),  # arithmetic
        ("echo $((2 * (3 > 1))) > f", True),
        ("echo a#b > f", True),  # not a comment: mid-word
        ("echo '#' > f", True),
        ("ls > /dev/tty", False),
        # options naming a file their program writes
        ("git diff --output=patch.txt", True),
        ("/usr/bin/git format-patch -o out HEAD~2", True),
        ("git log --oneline --", False),
        ("sort -k2 -o out.txt in.txt", True),
        ("sort -k2 in.txt", False),
        ("iconv -f utf-8 -t ascii --output out in", True),
        ("uniq -f 2 in.txt", False),
        ("xxd in.bin out.hex", True),
        # options naming a program their program runs
        ("rg --pre ./unpack TODO", True),
        ("rg --pre=./unpack TODO", True),
        ("rg -i TODO src", False),
        ("git grep -Ovim TODO", True),
        ("git grep --open-files-in-pager=vim TODO", True),
        ("git grep -n TODO", False),
        ("sort --compress-program=gzip big.txt", True),
        # a "#" inside a word hid every option after it
        ("sort in.txt#x -o /tmp/out", True),
        ("sort -t# -o /tmp/out in.txt", True),
        ("git log --grep=a#b --output=/tmp/out", True),
        ("git grep -e a#b -O'touch x;true'", True),
        # what the shell would still expand into an option
        ("sort ${U:--o} /tmp/x in.txt", True),
        ("sort {-o,/tmp/x} in.txt", True),
        ("sort $'-o' /tmp/x in.txt", True),
        ('sort "$OPT" in.txt', True),
        ("git log {--output=/tmp/x,-p}", True),
        ("sort * ", True),
        # clusters, values, "--"
        ("git format-patch -ko /tmp/patches HEAD~1", True),
        ("git grep -nO'touch x; true' hello", True),
        ("uniq -c in.txt out.txt", True),
        ("xxd -C in.bin out.hex", True),
        ("sort -T -- -o /tmp/x in.txt", True),
        ("rg -e -- --pre=./x pat", True),
        # more of what reading programs reach
        ("git ls-remote --upload-pack='touch x; git-upload-pack' .", True),
        ("git clone -u ./evil repo", True),
        ("find . -name '*.tmp' -delete", True),
        ("find . -exec rm {} ;", True),
        ("tree -R -H .", True),
        # and what they do not
        ("git ls-files -o --exclude-standard", False),
        ("git grep -o foo", False),
        ("git commit -o a.txt -m x", False),
        ("git show -Oorder.txt HEAD", False),
        ("git log @{u}..HEAD", False),
        ("git -C sub log --oneline", False),
        ("uniq < in.txt", False),
        ("uniq in.txt 2>/dev/null", False),
        ("xxd in.bin > /dev/null", False),
        ("find . -name '*.py'", False),
        ("sort -n -k2 data.txt", False),
        ("sort -to data.txt", False),
        ("rg -o 'fo+' src", False),
        ("git log --oneline -- '*.py'", False),
    ],
)
def test_writes_or_runs(command: str, writes: bool) -> None:
    """An output redirection to a file outside quotes is seen, and an option of a reading
    program that names a file it writes; descriptors, /dev/null and quoted text are not
    writes."""
    assert writes_or_runs(command) is writes


@pytest.mark.parametrize(
    ("command", "spellings"),
    [
        ("(rm -rf x)", ["rm -rf x"]),
        ("\\rm -rf x", ["rm -rf x"]),
        ("/bin/rm -rf x", ["rm -rf x"]),
        ("FOO=1 BAR=2 rm -rf x", ["rm -rf x"]),
        ("then rm -rf x", ["rm -rf x"]),
        ("{ rm -rf x", ["rm -rf x"]),
        ("'rm' -rf x", ["rm -rf x"]),
        ("nice -n 5 rm -rf x", ["rm -rf x"]),
        ("timeout 5 /bin/rm x", ["/bin/rm x", "rm x"]),
        ("timeout -s KILL 5 rm -rf x", ["rm -rf x"]),  # an option's value is no program
        ("timeout --signal KILL 5 rm x", ["rm x"]),
        ("sudo -u bob rm x", ["rm x"]),
        ("time -p rm x", ["rm x"]),
        ("flock lockfile rm x", ["rm x"]),
        ("busybox rm x", ["rm x"]),
        ("sh -c 'rm -rf x'", ["rm -rf x"]),
        (">/dev/null rm x", ["rm x"]),
        ("2> err.txt rm x", ["rm x"]),
        ("r\\\nm x", ["rm x"]),  # a line continuation
        ("$'rm' x", ["rm x"]),
        ("git status", []),
        ("git rm x", []),  # git runs no other program: never read as rm
        ("echo 'unclosed", []),
    ],
)
def test_command_spellings(command: str, spellings: list[str]) -> None:
    """The same program and arguments, however the part was dressed (after a program that
    runs another, every later word is a possible start: those spellings are among them)."""
    found = command_spellings(command)
    assert set(spellings) <= set(found)
    assert bool(found) == bool(spellings)
