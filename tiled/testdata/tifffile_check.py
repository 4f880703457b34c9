# Checks an OME-TIFF as tifffile reads it: one top-level page, its levels
# (at least 3) from the first page's SubIFDs, the OME-XML's physical pixel
# size, and each level the 2x2 mean (rounded, last row and column repeated
# where odd) of the one above.
# Usage: python3 tifffile_check.py FILE SIZE_X SIZE_Y UNIT ("-" for no size).
# Prints "ok LEVELS", or fails with an AssertionError naming the check.
import sys, numpy as np, tifffile, xml.etree.ElementTree as ET
path, sx, sy, unit = sys.argv[1:5]
with tifffile.TiffFile(path) as tif:
    assert tif.is_ome, "not OME"
    assert len(tif.pages) == 1, "%d top-level pages, want 1" % len(tif.pages)
    subs = tif.pages[0].subifds or ()
    s = tif.series[0]
    assert len(s.levels) >= 3, "%d levels" % len(s.levels)
    assert len(s.levels) == 1 + len(subs), "levels not from SubIFDs"
    ome = ET.fromstring(tif.ome_metadata)
    px = ome.find(".//{*}Pixels")
    for axis, want in (("X", sx), ("Y", sy)):
        got = px.get("PhysicalSize" + axis)
        if want == "-":
            assert got is None, "PhysicalSize%s %s, want none" % (axis, got)
        else:
            assert got is not None and float(got) == float(want), "PhysicalSize%s %s, want %s" % (axis, got, want)
            assert px.get("PhysicalSize%sUnit" % axis, "µm") == unit, "unit %s" % px.get("PhysicalSize%sUnit" % axis)
    a = s.levels[0].asarray().astype(np.uint32)
    for l in range(1, len(s.levels)):
        b = s.levels[l].asarray()
        h, w = a.shape
        p = np.pad(a, ((0, h % 2), (0, w % 2)), mode="edge")
        red = ((p[0::2, 0::2] + p[1::2, 0::2] + p[0::2, 1::2] + p[1::2, 1::2] + 2) // 4).astype(np.uint16)
        assert b.shape == red.shape, "level %d shape %s, want %s" % (l, b.shape, red.shape)
        assert (b == red).all(), "level %d is not level %d reduced 2x2" % (l, l - 1)
        a = b.astype(np.uint32)
    print("ok", len(s.levels))
