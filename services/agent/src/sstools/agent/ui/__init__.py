"""The chat edge: the HTTP app the browser and @gradio/client talk to."""
