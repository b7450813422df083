"""REST edge for the browser: conversation list, history, archive (user JWT)."""
