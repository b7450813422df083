"""Developer tooling behind `make run` and `make test`; never imported by a service."""
