# Regenerates the NumPy-written fixtures used by the npy package tests.
# Run with any NumPy >= 1.24 (the committed files were made with 1.24.2):
#
#	python3 gen_fixtures.py
#
# The tests only read these files; NumPy is not needed to run them.
import numpy as np

a = np.arange(6, dtype="<f8").reshape(2, 3) * 1.5 - 2.0
np.save("numpy_2x3_v1.npy", a)
with open("numpy_2x3_v2.npy", "wb") as f:
    np.lib.format.write_array(f, a, version=(2, 0))
with open("numpy_2x3_v3.npy", "wb") as f:
    np.lib.format.write_array(f, a, version=(3, 0))
np.save("numpy_col_5x1.npy", np.array([[1.0], [-2.5], [np.inf], [-0.0], [1e-300]]))
np.save("numpy_empty_0x777.npy", np.zeros((0, 777)))
np.save("numpy_fortran.npy", np.asfortranarray(a))
np.save("numpy_bigendian.npy", a.astype(">f8"))
np.save("numpy_float32.npy", a.astype("<f4"))
np.save("numpy_1d.npy", np.arange(4.0))
np.save("numpy_3d.npy", np.zeros((2, 2, 2)))
np.save("numpy_int64.npy", np.arange(6).reshape(2, 3).astype("<i8"))
