"""gRPC edge: DocparseService over detection and the worker pool."""
