"""gRPC edge: RouterService over the plain routing module."""
