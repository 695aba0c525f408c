//! One exchange with one upstream server over UDP or TCP, and what counts
//! as its reply: a response that parses, with the query's ID and question
//! (name compared case-insensitively, type and class). Anything else (a
//! spoofed answer for another name, garbage with a guessed ID) is ignored
//! while the UDP exchange waits for the real one, so it is never relayed.

use hickory_proto::op::{Message, MessageType};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// The smallest receive buffer of a UDP exchange; larger when the request
/// offers a larger EDNS size. (A 64 KiB buffer per waiting exchange was most
/// of the memory of a pile-up of forwards.)
const MIN_UDP_BUFFER: usize = 4_096;

/// One UDP exchange: waits for a reply to `query`, up to `timeout`.
pub(super) async fn udp(
    server: SocketAddr,
    packet: &[u8],
    query: &Message,
    timeout: Duration,
) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .map_err(io::Error::other)?;
    let socket = UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    socket.send(packet).await?;
    let offered = query
        .edns
        .as_ref()
        .map_or(0, |e| usize::from(e.max_payload()));
    let mut buf = vec![0u8; offered.max(MIN_UDP_BUFFER)];
    tokio::time::timeout(timeout, async {
        loop {
            let len = socket.recv(&mut buf).await?;
            if is_reply_to(&buf[..len], query) {
                return Ok(buf[..len].to_vec());
            }
        }
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upstream timed out"))?
}

/// One TCP exchange (length-prefixed), bounded by `timeout` overall.
pub(super) async fn tcp(
    server: SocketAddr,
    packet: &[u8],
    query: &Message,
    timeout: Duration,
) -> io::Result<Vec<u8>> {
    tokio::time::timeout(timeout, async {
        let mut stream = TcpStream::connect(server).await?;
        let len = u16::try_from(packet.len()).map_err(io::Error::other)?;
        let mut framed = len.to_be_bytes().to_vec();
        framed.extend_from_slice(packet);
        stream.write_all(&framed).await?;
        let len = usize::from(stream.read_u16().await?);
        let mut reply = vec![0u8; len];
        stream.read_exact(&mut reply).await?;
        if !is_reply_to(&reply, query) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply does not match the query",
            ));
        }
        Ok(reply)
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upstream timed out"))?
}

/// Whether `reply` answers `query`: it parses, is a response, and carries
/// the query's ID and question (hickory compares names case-insensitively).
fn is_reply_to(reply: &[u8], query: &Message) -> bool {
    Message::from_vec(reply).is_ok_and(|r| {
        r.metadata.message_type == MessageType::Response
            && r.metadata.id == query.metadata.id
            && r.queries == query.queries
    })
}

/// The failure class of an exchange error, as the metrics label it.
pub(super) fn failure_reason(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::TimedOut => "timeout",
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => "refused",
        io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => "bad_reply",
        _ => "error",
    }
}
