"""A tiny line-plot writer to PNG with the standard library only (no plotting package is
part of this project's set-up): panels side by side, one polyline per series."""

from __future__ import annotations

import struct
import zlib

PANEL_W, PANEL_H, MARGIN = 360, 240, 24
COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189)]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _line(pixels, width, x0, y0, x1, y1, colour):
    """Bresenham, 2 px thick."""
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        for ox, oy in ((0, 0), (1, 0), (0, 1)):
            i = ((y0 + oy) * width + x0 + ox) * 3
            if 0 <= i < len(pixels) - 2:
                pixels[i:i + 3] = bytes(colour)
        if x0 == x1 and y0 == y1:
            return
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


def save_line_plot(path, panels: list[list[list[float]]]) -> None:
    """`panels[p][s]` is series s of panel p (y values over steps); colours by series index."""
    width, height = PANEL_W * len(panels), PANEL_H
    pixels = bytearray(b"\xff" * (width * height * 3))
    for p, series in enumerate(panels):
        left, right = p * PANEL_W + MARGIN, (p + 1) * PANEL_W - MARGIN // 2
        top, bottom = MARGIN // 2, PANEL_H - MARGIN
        for a, b in (((left, top), (left, bottom)), ((left, bottom), (right, bottom))):
            _line(pixels, width, *a, *b, (0, 0, 0))
        values = [v for s in series for v in s]
        if not values:
            continue
        low, high = min(values), max(values)
        span = (high - low) or 1.0
        for s, ys in enumerate(series):
            points = [(left + round((right - left) * i / max(len(ys) - 1, 1)),
                       bottom - round((bottom - top) * (y - low) / span)) for i, y in enumerate(ys)]
            for a, b in zip(points, points[1:]):
                _line(pixels, width, *a, *b, COLOURS[s % len(COLOURS)])
    rows = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(_chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(_chunk(b"IEND", b""))
