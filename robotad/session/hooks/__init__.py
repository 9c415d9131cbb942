"""Claude-Code-compatible command hooks: configuration, the runner, the session's lifecycle of
events, the bounded shell child, and W3C trace context for hook children."""
