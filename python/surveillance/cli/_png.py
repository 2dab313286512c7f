"""The demo's chart without matplotlib: the same two panels drawn in pure Python into a PNG
(RGB pixels, a 5x7 bitmap font of capitals, digits and punctuation, zlib), so that
``pip install .`` alone draws the ``dwell.png`` the demo promises."""

from __future__ import annotations

import math
import struct
import zlib
from typing import Optional

#: A series: one value an hour (None: no point), per brand.
Series = dict[str, list[Optional[float]]]

WIDTH, HEIGHT = 900, 700  # matplotlib's figure: 9 x 7 inches at 100 dpi
WHITE, BLACK, GRID, FRAME = (255, 255, 255), (0, 0, 0), (225, 225, 225), (90, 90, 90)
#: matplotlib's default colour cycle (tab10), so both charts colour a brand alike.
COLORS = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
]
#: Each glyph: a character, then its 7 rows of 5 pixels as hexadecimal bytes (bit 4: left).
_GLYPHS = """
A0e11111f111111 B1e11111e11111e C0e11101010110e D1e11111111111e E1f10101e10101f F1f10101e101010
G0e11101711110f H1111111f111111 I0e04040404040e J0702020202120c K11121418141211 L1010101010101f
M111b1515111111 N11111915131111 O0e11111111110e P1e11111e101010 Q0e11111115120d R1e11111e141211
S0f10100e01011e T1f040404040404 U1111111111110e V11111111110a04 W1111111515150a X11110a040a1111
Y11110a04040404 Z1f01020408101f 00e11131519110e 1040c040404040e 20e11010204081f 31f02040201110e
402060a121f0202 51f101e0101110e 60608101e11110e 71f010204080808 80e11110e11110e 90e11110f01020c
(02040808080402 )08040202020408 ,000000000c0408 .00000000000c0c -0000001f000000 :000c0c000c0c00
/00010204081000 #0a0a1f0a1f0a0a %18190204081303 '0c040800000000 ?0e110102040004 &0c12140815120d
+0004041f040400
"""
FONT = {g[0]: bytes.fromhex(g[1:]) for g in _GLYPHS.split()}
FONT[" "] = bytes(7)
SCALE = 2  # a font pixel is 2 x 2 pixels: 10 x 14 a glyph, 12 pixels apart


class Canvas:
    """RGB pixels, white, ``width`` by ``height``, with the few shapes a chart needs."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def fill(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        """Fills ``[x0, x1) x [y0, y1)``, clipped to the canvas."""
        x0, x1 = max(0, x0), min(self.width, x1)
        y0, y1 = max(0, y0), min(self.height, y1)
        if x0 >= x1:
            return
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            at = (y * self.width + x0) * 3
            self.pixels[at : at + len(row)] = row

    def dot(self, x: float, y: float, radius: int, color: tuple[int, int, int]) -> None:
        """A filled disc centred on ``(x, y)``."""
        cx, cy = round(x), round(y)
        for dy in range(-radius, radius + 1):
            half = int(math.sqrt(radius * radius - dy * dy) + 0.5)
            self.fill(cx - half, cy + dy, cx + half + 1, cy + dy + 1, color)

    def line(
        self, a: tuple[float, float], b: tuple[float, float], color: tuple[int, int, int]
    ) -> None:
        """A line 2 pixels thick from ``a`` to ``b``."""
        steps = max(1, round(max(abs(b[0] - a[0]), abs(b[1] - a[1]))))
        for i in range(steps + 1):
            x = round(a[0] + (b[0] - a[0]) * i / steps)
            y = round(a[1] + (b[1] - a[1]) * i / steps)
            self.fill(x - 1, y - 1, x + 1, y + 1, color)

    def text(
        self, x: int, y: int, text: str, color: tuple[int, int, int] = BLACK, align: str = "left"
    ) -> None:
        """``text`` in capitals with its top at ``y``, starting (``align="left"``), centred or
        ending at ``x``; a character the font lacks is drawn as ``?``."""
        text = text.upper()
        width = text_width(text)
        x -= {"left": 0, "center": width // 2, "right": width}[align]
        for ch in text:
            for row, bits in enumerate(FONT.get(ch, FONT["?"])):
                for col in range(5):
                    if bits & (0x10 >> col):
                        px, py = x + col * SCALE, y + row * SCALE
                        self.fill(px, py, px + SCALE, py + SCALE, color)
            x += 6 * SCALE

    def png(self) -> bytes:
        """The canvas as a PNG file (8-bit RGB, no filter)."""
        stride = self.width * 3
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * stride : (y + 1) * stride]) for y in range(self.height)
        )
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw, 6))
            + _chunk(b"IEND", b"")
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def text_width(text: str) -> int:
    """Pixels that ``text`` spans."""
    return max(0, len(text) * 6 * SCALE - SCALE)


def nice_ticks(top: float) -> list[float]:
    """Ticks from 0 to at least ``top``, about five, 1, 2 or 5 times a power of ten apart."""
    if not top > 0:
        return [0.0, 1.0]
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 or value == 0 else f"{value:g}"


def _panel(
    canvas: Canvas,
    box: tuple[int, int, int, int],
    title: str,
    series: Series,
    colors: dict[str, tuple[int, int, int]],
    radius: int,
) -> None:
    """One panel in ``box`` (left, top, right, bottom): its title above it, a grid, the y
    ticks at its left, a line per brand with a dot per value, broken where an hour has none."""
    left, top, right, bottom = box
    canvas.text(left, top - 22, title)
    values = [v for ys in series.values() for v in ys if v is not None]
    ticks = nice_ticks(max(values, default=0.0))
    span = ticks[-1] or 1.0

    def at(hour: int, value: float) -> tuple[float, float]:
        return (
            left + (hour + 0.5) * (right - left) / 24,
            bottom - value / span * (bottom - top),
        )

    for hour in range(0, 24, 2):
        x = round(at(hour, 0)[0])
        canvas.fill(x, top, x + 1, bottom, GRID)
    for tick in ticks:
        y = round(at(0, tick)[1])
        canvas.fill(left, y, right, y + 1, GRID)
        canvas.text(left - 8, y - 7, _label(tick), align="right")
    for brand, ys in series.items():
        color = colors[brand]
        for hour in range(23):
            a, b = ys[hour], ys[hour + 1]
            if a is not None and b is not None:
                canvas.line(at(hour, a), at(hour + 1, b), color)
        for hour, share in enumerate(ys):
            if share is not None:
                canvas.dot(*at(hour, share), radius, color)
    for x0, y0, x1, y1 in (
        (left, top, right, top + 1),
        (left, bottom, right + 1, bottom + 1),
        (left, top, left + 1, bottom),
        (right, top, right + 1, bottom),
    ):
        canvas.fill(x0, y0, x1, y1, FRAME)


def draw(path: str, medians: Series, counts: Series) -> None:
    """Writes to ``path`` the chart of ``medians`` (median dwell time by local hour, per
    brand) above ``counts`` (the events each point rests on), as the matplotlib chart lays
    them out, with the brands' legend at the right."""
    canvas = Canvas(WIDTH, HEIGHT)
    brands = sorted(medians)
    colors = {b: COLORS[i % len(COLORS)] for i, b in enumerate(brands)}
    left, right = 100, 640
    canvas.text((left + right) // 2, 16, "Dwell time by local hour, per brand", align="center")
    _panel(canvas, (left, 80, right, 430), "median dwell time (s)", medians, colors, 4)
    _panel(canvas, (left, 490, right, 620), "events per point", counts, colors, 3)
    for hour in range(0, 24, 2):
        x = round(left + (hour + 0.5) * (right - left) / 24)
        canvas.text(x, 630, str(hour), align="center")
    canvas.text((left + right) // 2, 664, "local hour of day", align="center")
    for i, brand in enumerate(brands):
        y = 80 + i * 26
        canvas.fill(right + 20, y + 2, right + 34, y + 12, colors[brand])
        canvas.text(right + 42, y, brand[:18])
    with open(path, "wb") as f:
        f.write(canvas.png())
