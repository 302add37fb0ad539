"""Developer tools that are not part of the product: fake services for tests and benchmarks."""
