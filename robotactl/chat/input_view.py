"""The input line shows what will be sent: a bidi control or a character that draws nothing
stands there as ``<U+202E>``, ``<U+200B>``.

A prompt is often pasted from elsewhere, and prompt_toolkit draws C0 and C1 controls itself
(``^[``) but sends bidi controls to the terminal as they are: a right-to-left override in a
pasted line made it read in another order than the one sent, and a zero-width space or a
no-break space hid between words. `ShownHidden` is an input processor that draws each such
character as `robotactl.terminal_text.hidden_code_point` spells it, with the cursor moving
over it as over one character; the text sent is unchanged.
"""

from __future__ import annotations

from typing import Final

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput
from prompt_toolkit.layout.utils import explode_text_fragments

from robotactl.terminal_text import hidden_code_point

__all__ = ["SHOWN_STYLE", "ShownHidden"]

#: The style class of a character drawn by its code point.
SHOWN_STYLE: Final = "class:shown-hidden"


class ShownHidden(Processor):
    """Draws each bidi control and each character that draws nothing by its code point."""

    def apply_transformation(self, transformation_input: TransformationInput) -> Transformation:
        fragments = explode_text_fragments(transformation_input.fragments)
        if not any(hidden_code_point(fragment[1]) for fragment in fragments):
            return Transformation(transformation_input.fragments)
        shown: StyleAndTextTuples = []
        #: Display position of each source position, and one past the end (the cursor's).
        starts: list[int] = []
        position = 0
        for fragment in fragments:
            starts.append(position)
            code_point = hidden_code_point(fragment[1])
            if code_point is None:
                shown.append(fragment)
                position += 1
            else:
                shown.append((f"{fragment[0]} {SHOWN_STYLE}", code_point))
                position += len(code_point)
        starts.extend((position, position + 1))

        def source_to_display(source: int) -> int:
            return starts[min(max(source, 0), len(starts) - 1)]

        def display_to_source(display: int) -> int:
            # The source character whose drawing covers `display`: the last one starting
            # at or before it.
            low, high = 0, len(starts) - 1
            while low < high:
                middle = (low + high + 1) // 2
                if starts[middle] <= display:
                    low = middle
                else:
                    high = middle - 1
            return low

        return Transformation(
            shown, source_to_display=source_to_display, display_to_source=display_to_source
        )
