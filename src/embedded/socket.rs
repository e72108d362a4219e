//! An accepted TCP connection, shared between the task that serves it and the untrusted pool
//! (`connections.rs`), which may look into it (a peek, nothing taken) to see whether its client has
//! sent anything before closing it to make room. The task's reads tell the pool when the first
//! bytes arrive.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::connections::{Conn, Probe};

/// The served side of an accepted connection: reads and writes go to the shared stream; the first
/// bytes read mark the connection greeted in its pool.
pub struct Socket {
    tcp: Arc<TcpStream>,
    conn: Option<Arc<Conn>>,
}

impl Socket {
    /// The stream, to be served, and the probe the pool uses to look for unread bytes (it holds
    /// the stream weakly: a closed connection is not kept open by its pool entry).
    pub fn new(tcp: TcpStream) -> (Socket, Probe) {
        let tcp = Arc::new(tcp);
        let weak = Arc::downgrade(&tcp);
        let probe: Probe = Box::new(move || weak.upgrade().is_some_and(|t| bytes_waiting(&t)));
        (Socket { tcp, conn: None }, probe)
    }

    /// The pool entry to tell when the first bytes have been read.
    pub fn tell(&mut self, conn: Arc<Conn>) {
        self.conn = Some(conn);
    }
}

/// Whether bytes wait unread in `tcp` (non-blocking: tokio's sockets are).
fn bytes_waiting(tcp: &TcpStream) -> bool {
    let mut one = [MaybeUninit::<u8>::uninit()];
    matches!(socket2::SockRef::from(tcp).peek(&mut one), Ok(n) if n > 0)
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.tcp.poll_read_ready(cx))?;
            match this.tcp.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    if n > 0
                        && let Some(conn) = this.conn.take()
                    {
                        conn.greeted();
                    }
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale; `try_read` cleared it, so the next poll waits.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tcp.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tcp.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(socket2::SockRef::from(&*self.tcp).shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes sent are seen by the probe before they are read, and not after; reads and writes
    /// pass through; a closed stream is no longer looked into.
    #[tokio::test]
    async fn the_probe_sees_unread_bytes_and_reads_pass_through() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let (mut socket, probe) = Socket::new(tcp);
        assert!(!probe(), "nothing sent yet");
        client.write_all(b"hello").await.unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while !probe() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the probe never saw the bytes"
            );
            tokio::task::yield_now().await;
        }
        let mut got = [0u8; 5];
        socket.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello");
        assert!(!probe(), "the bytes were read");
        socket.write_all(b"back").await.unwrap();
        socket.shutdown().await.unwrap();
        let mut back = Vec::new();
        client.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"back");
        client.write_all(b"more").await.unwrap();
        drop(socket);
        assert!(!probe(), "a dropped socket is not looked into");
    }
}
