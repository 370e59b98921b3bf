"""One side's CPU profile as an icicle graph: a self-contained HTML fragment (an inline SVG, nothing fetched).

The top bar is all the CPU sampled; each row below is one frame deeper (root first, as stacks are written). A
rect's width is the time spent in its frame at that stack position (its total there), out of all the CPU sampled;
children are drawn left to right in label order, so one profile always draws the same bytes. Each rect carries a
<title> (hover text): the frame's label, its µs per roundtrip total and self at that position and its share of
the sampled CPU. A rect wide enough shows its label, shortened with "…" where needed; rects narrower than
MIN_RECT_WIDTH_PX are left out (their time stays in their parent's width). Every label goes through html.escape.
"""

from __future__ import annotations

import html
import zlib
from dataclasses import dataclass, field

from pingpong.harness.analysis.profiles import Profile, Stack, profile_name, us_per_roundtrip

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
WIDTH_PX = 1200
ROW_HEIGHT_PX = 18
FONT_SIZE_PX = 11
CHARACTER_WIDTH_PX = 6.6  # of an 11 px monospace character: how many fit in a rect
TEXT_PADDING_PX = 3
MIN_TEXT_CHARACTERS = 3  # fewer would be noise: the rect stays unlabelled, its <title> still says what it is
MIN_RECT_WIDTH_PX = 0.1
ALL_LABEL = "all"
ALL_COLOUR = "rgb(200,200,200)"


@dataclass
class _Frame:
    """A frame at one stack position while the tree is built: its time there, and the frames called from it."""

    label: str
    total_s: float = 0.0
    self_s: float = 0.0
    children: dict[str, _Frame] = field(default_factory=dict)


def _tree(stacks: dict[Stack, float]) -> _Frame:
    root = _Frame(ALL_LABEL)
    for stack in sorted(stacks):  # a fixed order of addition: the same widths whatever the dict's order
        seconds = stacks[stack]
        frame = root
        frame.total_s += seconds
        for label in stack:
            frame = frame.children.setdefault(label, _Frame(label))
            frame.total_s += seconds
        frame.self_s += seconds
    return root


def _depth(frame: _Frame) -> int:
    deepest, pending = 0, [(frame, 0)]
    while pending:
        current, depth = pending.pop()
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in current.children.values())
    return deepest


def hot_colour(label: str) -> str:
    """A warm colour chosen by the label alone (CRC-32), so one function has one colour in every graph."""
    digest = zlib.crc32(label.encode("utf-8"))
    red = 205 + (digest & 0xFF) * 50 // 255
    green = ((digest >> 8) & 0xFF) * 230 // 255
    blue = ((digest >> 16) & 0xFF) * 55 // 255
    return f"rgb({red},{green},{blue})"


def microseconds_text(value: float) -> str:
    """µs with the digits that mean something: 1234 → '1234', 56.78 → '56.8', 0.123 → '0.12'."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fitted_label(label: str, width_px: float) -> str | None:
    """The label as it fits in a rect width_px wide: whole, shortened with '…', or None when too few would fit."""
    fitting = int((width_px - 2 * TEXT_PADDING_PX) / CHARACTER_WIDTH_PX)
    if fitting < MIN_TEXT_CHARACTERS:
        return None
    if len(label) <= fitting:
        return label
    return label[:fitting - 1] + "…"


def _hover_text(profile: Profile, frame: _Frame, sampled_s: float) -> str:
    share = 100 * frame.total_s / sampled_s
    return (f"{frame.label}\n{microseconds_text(us_per_roundtrip(profile, frame.total_s))} µs per roundtrip total, "
            f"{microseconds_text(us_per_roundtrip(profile, frame.self_s))} µs self ({share:.1f}% of sampled CPU)")


def _frame_svg(profile: Profile, frame: _Frame, x_px: float, depth: int, sampled_s: float, is_root: bool) -> str:
    width_px = WIDTH_PX * frame.total_s / sampled_s
    y_px = depth * ROW_HEIGHT_PX
    colour = ALL_COLOUR if is_root else hot_colour(frame.label)
    parts = [f'<g><title>{html.escape(_hover_text(profile, frame, sampled_s))}</title>',
             f'<rect x="{x_px:.2f}" y="{y_px}" width="{width_px:.2f}" height="{ROW_HEIGHT_PX - 1}" fill="{colour}"/>']
    text = fitted_label(frame.label, width_px)
    if text is not None:
        parts.append(f'<text x="{x_px + TEXT_PADDING_PX:.2f}" y="{y_px + ROW_HEIGHT_PX - 5}">'
                     f'{html.escape(text)}</text>')
    parts.append("</g>")
    return "".join(parts)


def flame_graph_svg(profile: Profile) -> str:
    """The icicle graph alone, as an inline <svg>; '' for a profile with no CPU sampled; ValueError for one
    with no roundtrip (nothing to divide by)."""
    sampled_s = profile.sampled_s
    if sampled_s <= 0:
        return ""
    root = _tree(profile.stacks)
    height_px = (_depth(root) + 1) * ROW_HEIGHT_PX
    elements: list[str] = []
    pending: list[tuple[_Frame, float, int]] = [(root, 0.0, 0)]  # depth first, children in label order
    while pending:
        frame, x_px, depth = pending.pop()
        elements.append(_frame_svg(profile, frame, x_px, depth, sampled_s, is_root=depth == 0))
        placed: list[tuple[_Frame, float, int]] = []
        child_x_px = x_px
        for label in sorted(frame.children):
            child = frame.children[label]
            if WIDTH_PX * child.total_s / sampled_s >= MIN_RECT_WIDTH_PX:
                placed.append((child, child_x_px, depth + 1))
            child_x_px += WIDTH_PX * child.total_s / sampled_s
        pending.extend(reversed(placed))
    description = html.escape(f"Flame graph of {profile_name(profile)}", quote=True)
    return (f'<svg xmlns="{SVG_NAMESPACE}" width="{WIDTH_PX}" height="{height_px}" '
            f'viewBox="0 0 {WIDTH_PX} {height_px}" font-family="monospace" font-size="{FONT_SIZE_PX}" '
            f'role="img" aria-label="{description}">\n' + "\n".join(elements) + "\n</svg>")


def flame_graph_html(profile: Profile, title: str) -> str:
    """A <figure>: a caption saying what was sampled and how much CPU per roundtrip, and the icicle graph."""
    window = (f"{profile.roundtrips} roundtrips in {profile.wall_s:.3g} s, "
              f"sampled every {profile.interval_s * 1000:g} ms")
    if profile.roundtrips > 0:
        sampled = f"{microseconds_text(us_per_roundtrip(profile, profile.sampled_s))} µs of CPU per roundtrip"
    else:
        sampled = f"{profile.sampled_s:.3f} s of CPU, no roundtrip completed"
    caption = f"{title}: {profile_name(profile)}; {sampled} ({window})"
    graph = flame_graph_svg(profile) if profile.roundtrips > 0 else ""
    body = graph or "<p>No CPU sampled per roundtrip to draw.</p>"
    return (f'<figure class="flame-graph">\n<figcaption>{html.escape(caption)}</figcaption>\n{body}\n'
            f"</figure>\n")
