//! The client side of MCP over Streamable HTTP: a [`Peer`](crate::peer::Peer) whose messages
//! travel as HTTP requests to one server URL.
