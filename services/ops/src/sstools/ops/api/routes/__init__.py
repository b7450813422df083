"""The ops REST API, one router per area; each operation declares the tool whose policy guards it."""
