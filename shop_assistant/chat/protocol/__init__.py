"""The websocket protocol: the consumer, the session's frames and state, admission, events between nodes, the shopper's identity."""
