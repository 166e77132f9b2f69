//! The three stacks, each as a server (`serve`) and a client (`connect`) over any byte stream.

pub mod acp_sdk;
pub mod cancelkit;
pub mod rmcp;

use std::pin::Pin;

/// The reading half of a connection, whatever the transport.
pub type BoxRead = Pin<Box<dyn tokio::io::AsyncRead + Send>>;
/// The writing half of a connection, whatever the transport.
pub type BoxWrite = Pin<Box<dyn tokio::io::AsyncWrite + Send>>;
