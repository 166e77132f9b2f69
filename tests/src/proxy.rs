//! A TCP proxy on loopback that cuts a connection once the server side has been silent for a
//! while, as a load balancer's idle timeout does: what keep-alive comments on long event streams
//! are for.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts a proxy to `target` (`host:port`) that closes a connection once the server has sent
/// nothing for `idle`; its `http://` base address. It runs until the runtime stops.
pub async fn idle_cutting(target: String, idle: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let address = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&target).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let upstream = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                let mut buffer = vec![0u8; 16 << 10];
                loop {
                    match tokio::time::timeout(idle, server_read.read(&mut buffer)).await {
                        Ok(Ok(n)) if n > 0 => {
                            if client_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        _ => break, // idle too long, or closed
                    }
                }
                upstream.abort();
            });
        }
    });
    format!("http://{address}")
}
