//! Where a worker and the server meet: a Unix socket path or a TCP address, the listening side
//! (the server) and the connected stream either side reads and writes frames on.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// `unix:PATH` or `tcp:HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl FromStr for Endpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("unix", path)) if !path.is_empty() => Ok(Endpoint::Unix(path.into())),
            Some(("tcp", addr)) => {
                addr.parse().map(Endpoint::Tcp).map_err(|e| format!("tcp address {addr}: {e}"))
            }
            _ => Err(format!("endpoint {s:?}: expected unix:PATH or tcp:IP:PORT")),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
            Endpoint::Tcp(addr) => write!(f, "tcp:{addr}"),
        }
    }
}

impl Endpoint {
    pub fn connect(&self) -> io::Result<Stream> {
        match self {
            Endpoint::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
            Endpoint::Tcp(addr) => {
                let stream = TcpStream::connect(addr)?;
                stream.set_nodelay(true)?;
                Ok(Stream::Tcp(stream))
            }
        }
    }
}

/// A connection between the server and one worker.
#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
        }
    }

    /// Closes both directions: a read or write waiting on this connection (or a clone of it)
    /// fails at once.
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    /// How long a read may wait (`None`: for ever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::Tcp(s) => s.set_read_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// The server's side, where workers connect. A Unix socket's file is removed when dropped.
#[derive(Debug)]
pub enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

impl Listener {
    /// Listens on `endpoint` (TCP port 0: a free port; [`Listener::endpoint`] says which).
    pub fn bind(endpoint: &Endpoint) -> io::Result<Self> {
        let listener = match endpoint {
            Endpoint::Unix(path) => Listener::Unix(UnixListener::bind(path)?, path.clone()),
            Endpoint::Tcp(addr) => Listener::Tcp(TcpListener::bind(addr)?),
        };
        match &listener {
            Listener::Unix(l, _) => l.set_nonblocking(true)?,
            Listener::Tcp(l) => l.set_nonblocking(true)?,
        }
        Ok(listener)
    }

    /// Where workers reach this listener.
    pub fn endpoint(&self) -> io::Result<Endpoint> {
        match self {
            Listener::Unix(_, path) => Ok(Endpoint::Unix(path.clone())),
            Listener::Tcp(l) => l.local_addr().map(Endpoint::Tcp),
        }
    }

    /// The next connection, waiting until `deadline`; `gave_up` is asked between polls (a worker
    /// process that exited will never connect) and ends the wait with its error.
    pub fn accept(
        &self,
        deadline: Instant,
        mut gave_up: impl FnMut() -> Option<io::Error>,
    ) -> io::Result<Stream> {
        loop {
            let accepted = match self {
                Listener::Unix(l, _) => l.accept().map(|(s, _)| Stream::Unix(s)),
                Listener::Tcp(l) => {
                    l.accept().and_then(|(s, _)| s.set_nodelay(true).map(|()| Stream::Tcp(s)))
                }
            };
            match accepted {
                Ok(stream) => {
                    match &stream {
                        Stream::Unix(s) => s.set_nonblocking(false)?,
                        Stream::Tcp(s) => s.set_nonblocking(false)?,
                    }
                    return Ok(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if let Some(e) = gave_up() {
                return Err(e);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no worker connected in time"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_print() {
        for text in ["unix:/tmp/w.sock", "tcp:127.0.0.1:9000", "tcp:[::1]:80"] {
            let endpoint: Endpoint = text.parse().expect(text);
            assert_eq!(endpoint.to_string(), text);
        }
        for bad in ["", "unix:", "tcp:localhost", "udp:1.2.3.4:5", "/tmp/w.sock"] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
    }
}
