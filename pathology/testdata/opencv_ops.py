#!/usr/bin/python3
"""The pathology operations with OpenCV on one thread, for comparison with
`pathology -cpu-ops`.

Usage: opencv_ops.py DIR [--rounds N] [--cpu-time] [--save]

DIR holds the .npy inputs `pathology -cpu-ops -out DIR` writes. Each
operation runs once as a warm-up, then N times (default 3); the script
prints the median as `op NAME: MS ms`, the format of `pathology -cpu-ops`
(wall time, or with --cpu-time the thread's CPU time). With --save it
writes each output into DIR as cv_NAME.npy, for the cross-check of
opencv_test.go. It does what OpenCV can of each operation:

  MorphOpen      morphologyEx(dark, MORPH_OPEN, 19x19 MORPH_ELLIPSE)
                 (the darkness image is given: pathology's time includes
                 computing it from the RGB tile)
  AreaThreshold  connectedComponentsWithStats (8-connected), then the
                 components of at least 20 pixels kept
  FillHoles      floodFill (4-connected) of the background from a one-pixel
                 frame around the mask; what it does not reach is filled
  PreWatershed   distanceTransform(DIST_L2, DIST_MASK_PRECISE) (OpenCV has
                 no morphological reconstruction: pathology's time includes
                 the h-maxima reconstruction after the transform)
  Watershed      watershed() of pathology's relief and markers, the
                 background a marker of its own (pathology's time includes
                 finding the markers: a reconstruction and a labelling)
  BWLabel        connectedComponents (4-connected)
  Canny          Canny(grey, 50, 150) (aperture 3, L1): FeatGradient's
                 edges, which pathology times alone for this comparison
"""
import sys
import time

import cv2
import numpy as np

MIN_AREA = 20


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    d = args[0]
    rounds = 3
    if "--rounds" in args:
        rounds = int(args[args.index("--rounds") + 1])
    clock = time.thread_time if "--cpu-time" in args else time.perf_counter
    save = "--save" in args
    cv2.setNumThreads(1)
    cv2.setUseOptimized(True)
    ld = lambda name: np.load(f"{d}/{name}.npy")
    dark, cand, area, filled = ld("dark"), ld("candidates"), ld("area"), ld("filled")
    relief, markers, ws, grey = ld("relief"), ld("markers"), ld("ws"), ld("grey")
    h, w = dark.shape
    disk = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (19, 19))
    relief3 = cv2.merge([relief, relief, relief])
    bg = np.int32(markers.max() + 1)
    wmarkers = np.where(filled != 0, markers, bg).astype(np.int32)

    def morph_open():
        return cv2.morphologyEx(dark, cv2.MORPH_OPEN, disk)

    def area_threshold():
        n, lab, stats, _ = cv2.connectedComponentsWithStats(cand, connectivity=8, ltype=cv2.CV_32S)
        keep = (stats[:, cv2.CC_STAT_AREA] >= MIN_AREA).astype(np.uint8)
        keep[0] = 0
        return keep[lab]

    def fill_holes():
        framed = cv2.copyMakeBorder(area, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
        ffmask = np.zeros((h + 4, w + 4), np.uint8)
        cv2.floodFill(framed, ffmask, (0, 0), 2, flags=4)
        return (framed[1:-1, 1:-1] != 2).astype(np.uint8)

    def pre_watershed():
        return cv2.distanceTransform(filled, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)

    def watershed():
        m = wmarkers.copy()  # watershed writes into its markers
        cv2.watershed(relief3, m)
        return m

    def bw_label():
        return cv2.connectedComponents(ws, connectivity=4, ltype=cv2.CV_32S)[1]

    def canny():
        return (cv2.Canny(grey, 50, 150, apertureSize=3, L2gradient=False) != 0).astype(np.uint8)

    ops = [("MorphOpen", morph_open), ("AreaThreshold", area_threshold), ("FillHoles", fill_holes),
           ("PreWatershed", pre_watershed), ("Watershed", watershed), ("BWLabel", bw_label), ("Canny", canny)]
    for name, f in ops:
        out = f()
        ts = []
        for _ in range(rounds):
            start = clock()
            out = f()
            ts.append(clock() - start)
        ts.sort()
        print(f"op {name}: {ts[len(ts) // 2] * 1e3:.2f} ms", flush=True)
        if save:
            np.save(f"{d}/cv_{name}.npy", out)


if __name__ == "__main__":
    main()
