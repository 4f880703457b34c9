extern "C" __global__ void htgs_test_axpb(double *x, long long n, double a, float b) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		x[i] = a * x[i] + b;
	}
}
