//! DNS queries from tests: [`query`], from the test process, for polling, and
//! [`dig`] for what a real client sees. Both give a [`Reply`] in `dig`'s words
//! (status `NOERROR`, flags `qr aa`, answer lines with single spaces).

use anyhow::{bail, Context, Result};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};
use std::net::SocketAddr;
use std::process::Stdio;
use std::str::FromStr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One reply, split into the parts the tests look at.
#[derive(Debug, Default, Clone)]
pub struct Reply {
    /// `NOERROR`, `NXDOMAIN`, `SERVFAIL`, ...; empty if there was no reply.
    pub status: String,
    pub flags: Vec<String>,
    pub answer: Vec<String>,
    pub authority: Vec<String>,
    pub additional: Vec<String>,
    /// `dig`'s whole output, or the message's debug form.
    pub raw: String,
}

/// Runs `dig @127.0.0.1 -p PORT +time=5 +tries=1 ARGS...` (a loaded CI
/// machine can take seconds; a later `+time` in `args` wins).
pub fn dig(port: u16, args: &[&str]) -> Result<String> {
    dig_at(SocketAddr::from(([127, 0, 0, 1], port)), args)
}

/// [`dig`] against any `server` (a container's address, say).
pub fn dig_at(server: SocketAddr, args: &[&str]) -> Result<String> {
    let at = format!("@{}", server.ip());
    let out = crate::tools::command("dig", "dnsutils")?
        .args([&at, "-p", &server.port().to_string(), "+time=5", "+tries=1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running dig")?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`dig`] run off the async runtime's threads, its output parsed.
pub async fn dig_reply(port: u16, args: &[&str]) -> Result<Reply> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let text = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        dig(port, &args)
    })
    .await??;
    Ok(parse(&text))
}

/// Splits `dig`'s output into a [`Reply`].
pub fn parse(text: &str) -> Reply {
    let mut reply = Reply {
        raw: text.to_string(),
        ..Reply::default()
    };
    let mut section: Option<&mut Vec<String>> = None;
    for line in text.lines() {
        if let Some(rest) = line.split("status: ").nth(1) {
            reply.status = rest.split(',').next().unwrap_or_default().to_string();
        }
        if let Some(rest) = line.strip_prefix(";; flags: ") {
            let flags = rest.split(';').next().unwrap_or_default();
            reply.flags = flags.split_whitespace().map(String::from).collect();
        }
        section = match line {
            ";; ANSWER SECTION:" => Some(&mut reply.answer),
            ";; AUTHORITY SECTION:" => Some(&mut reply.authority),
            ";; ADDITIONAL SECTION:" => Some(&mut reply.additional),
            "" => None,
            l if l.starts_with(';') => section,
            l => {
                if let Some(s) = section.as_deref_mut() {
                    s.push(l.split_whitespace().collect::<Vec<_>>().join(" "));
                }
                section
            }
        };
    }
    reply
}

/// How a query travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// How long [`query`] waits for a reply.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the server on `127.0.0.1:port` for `name` `qtype` (e.g. `"A"`),
/// recursion desired, no EDNS (as `dig` without options, minus its EDNS).
pub async fn query(port: u16, name: &str, qtype: &str, transport: Transport) -> Result<Reply> {
    let server = SocketAddr::from(([127, 0, 0, 1], port));
    query_at(server, name, qtype, transport).await
}

/// [`query`] to any `server`.
pub async fn query_at(
    server: SocketAddr,
    name: &str,
    qtype: &str,
    transport: Transport,
) -> Result<Reply> {
    let fqdn = if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    };
    let name = Name::from_str(&fqdn).with_context(|| format!("query name {name:?}"))?;
    let qtype = RecordType::from_str(qtype).with_context(|| format!("query type {qtype:?}"))?;
    let mut message = Message::query();
    message.add_query(Query::query(name, qtype));
    message.metadata.recursion_desired = true;
    let packet = message.to_vec()?;
    let exchange = async {
        match transport {
            Transport::Udp => exchange_udp(server, &packet).await,
            Transport::Tcp => exchange_tcp(server, &packet).await,
        }
    };
    let bytes = tokio::time::timeout(QUERY_TIMEOUT, exchange)
        .await
        .with_context(|| format!("no reply from {server} within {QUERY_TIMEOUT:?}"))??;
    let reply = Message::from_vec(&bytes).context("decoding the reply")?;
    if reply.metadata.id != message.metadata.id {
        bail!(
            "reply id {} for query id {}",
            reply.metadata.id,
            message.metadata.id
        );
    }
    Ok(to_reply(&reply))
}

async fn exchange_udp(server: SocketAddr, packet: &[u8]) -> Result<Vec<u8>> {
    let local = match server {
        SocketAddr::V4(a) if a.ip().is_loopback() => "127.0.0.1:0",
        SocketAddr::V4(_) => "0.0.0.0:0",
        SocketAddr::V6(_) => "[::]:0",
    };
    let socket = tokio::net::UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    socket.send(packet).await?;
    let mut buf = vec![0; 65_535];
    let n = socket.recv(&mut buf).await?;
    buf.truncate(n);
    Ok(buf)
}

async fn exchange_tcp(server: SocketAddr, packet: &[u8]) -> Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(server).await?;
    let len = u16::try_from(packet.len())?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(packet).await?;
    let len = stream.read_u16().await?;
    let mut buf = vec![0; usize::from(len)];
    stream.read_exact(&mut buf).await?;
    Ok(buf)
}

/// A decoded message in `dig`'s words.
fn to_reply(message: &Message) -> Reply {
    let header = &message.metadata;
    let flags = [
        ("qr", true),
        ("aa", header.authoritative),
        ("tc", header.truncation),
        ("rd", header.recursion_desired),
        ("ra", header.recursion_available),
        ("ad", header.authentic_data),
        ("cd", header.checking_disabled),
    ];
    let lines = |records: &[Record]| records.iter().map(|r| r.to_string()).collect();
    Reply {
        status: mnemonic(header.response_code),
        flags: flags
            .iter()
            .filter(|(_, set)| *set)
            .map(|(f, _)| f.to_string())
            .collect(),
        answer: lines(&message.answers),
        authority: lines(&message.authorities),
        additional: lines(&message.additionals),
        raw: format!("{message:?}"),
    }
}

/// `dig`'s name for a response code.
fn mnemonic(code: ResponseCode) -> String {
    match code {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        other => format!("RCODE{}", u16::from(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dig_output_is_split_into_sections() {
        let text = ";; ->>HEADER<<- opcode: QUERY, status: NXDOMAIN, id: 1\n\
                    ;; flags: qr aa rd; QUERY: 1, ANSWER: 1\n\n\
                    ;; ANSWER SECTION:\n\
                    a.cluster.local.\t30\tIN\tA\t10.0.0.1\n\n\
                    ;; AUTHORITY SECTION:\n\
                    cluster.local.\t60\tIN\tSOA\tns.dns. h. 1 2 3 4 5\n";
        let r = parse(text);
        assert_eq!(r.status, "NXDOMAIN");
        assert_eq!(r.flags, ["qr", "aa", "rd"]);
        assert_eq!(r.answer, ["a.cluster.local. 30 IN A 10.0.0.1"]);
        assert_eq!(
            r.authority,
            ["cluster.local. 60 IN SOA ns.dns. h. 1 2 3 4 5"]
        );
    }

    #[test]
    fn a_message_reads_as_dig_prints_it() {
        use hickory_proto::rr::{rdata::A, RData};
        let mut m = Message::response(7, hickory_proto::op::OpCode::Query);
        m.metadata.authoritative = true;
        m.metadata.response_code = ResponseCode::NXDomain;
        m.answers.push(Record::from_rdata(
            Name::from_str("a.cluster.local.").unwrap(),
            30,
            RData::A(A::new(10, 0, 0, 1)),
        ));
        let r = to_reply(&m);
        assert_eq!(r.status, "NXDOMAIN");
        assert_eq!(r.flags, ["qr", "aa"]);
        assert_eq!(r.answer, ["a.cluster.local. 30 IN A 10.0.0.1"]);
    }
}
