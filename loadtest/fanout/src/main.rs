//! Holds `--connections` SSE streams of `GET /api/client/streaming` (spread over `--sources`
//! loopback addresses, 127.0.0.2 and up), waits until each has its hydration, then makes
//! `--writes` single writes (switching the toggle `bench.stream` on and off through the admin
//! API) and prints, per write, the time from the write's acknowledgement until 50 %, 99 % and
//! 100 % of the streams had its event — one JSON line each, as `loadtest/streaming.py` does,
//! but fast enough that the figures are the server's: a read costs microseconds here, not the
//! tens of microseconds of one Python thread. With `--hold-seconds` it then keeps the streams
//! open that long (to measure polling beside them).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

/// The toggle the writes switch.
const TOGGLE: &str = "bench.stream";

/// What a stream has received: each event id with its arrival.
type Arrivals = Arc<Mutex<Vec<(u64, Instant)>>>;

struct Options {
    server: SocketAddr,
    connections: usize,
    sources: u8,
    writes: usize,
    hold_seconds: u64,
    token: Option<String>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        server: SocketAddr::from(([127, 0, 0, 1], 4242)),
        connections: 1000,
        sources: 4,
        writes: 3,
        hold_seconds: 0,
        token: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(
                "usage: flagpole-fanout [--server 127.0.0.1:4242] [--connections N] \
                        [--sources K] [--writes W] [--hold-seconds S] [--token T]"
                    .into(),
            );
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--server" => options.server = value.parse().map_err(|e| bad(&e))?,
            "--connections" => options.connections = value.parse().map_err(|e| bad(&e))?,
            "--sources" => options.sources = value.parse().map_err(|e| bad(&e))?,
            "--writes" => options.writes = value.parse().map_err(|e| bad(&e))?,
            "--hold-seconds" => options.hold_seconds = value.parse().map_err(|e| bad(&e))?,
            "--token" => options.token = Some(value),
            _ => return Err(format!("unknown option {flag} (see --help)")),
        }
    }
    if options.sources == 0 || options.sources > 200 {
        return Err("--sources must be 1 to 200".into());
    }
    Ok(options)
}

/// Streams open now.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// One stream: connects from `source`, then records every `id:` line until the server closes.
async fn hold_stream(
    server: SocketAddr,
    source: IpAddr,
    token: Option<String>,
    arrivals: Arrivals,
) -> std::io::Result<()> {
    let result = read_stream(server, source, token, arrivals).await;
    OPEN.fetch_sub(1, Ordering::Relaxed);
    result
}

async fn read_stream(
    server: SocketAddr,
    source: IpAddr,
    token: Option<String>,
    arrivals: Arrivals,
) -> std::io::Result<()> {
    OPEN.fetch_add(1, Ordering::Relaxed);
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    let mut stream = socket.connect(server).await?;
    let auth = token
        .map(|t| format!("Authorization: {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET /api/client/streaming HTTP/1.1\r\nHost: {server}\r\nAccept: text/event-stream\r\n{auth}\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    if !line.contains(" 200 ") {
        return Err(std::io::Error::other(format!(
            "stream refused: {}",
            line.trim()
        )));
    }
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        if let Some(id) = line.strip_prefix("id: ") {
            if let Ok(id) = id.trim().parse::<u64>() {
                if let Ok(mut seen) = arrivals.lock() {
                    seen.push((id, Instant::now()));
                }
            }
        }
    }
}

/// `POST path` with a JSON `body` on the admin API (basic auth) over `connection`; fails
/// unless the status is 2xx (or one of `also`); the instants the request was sent and its
/// answer's headers read.
async fn admin_post(
    connection: &mut BufReader<TcpStream>,
    path: &str,
    body: &str,
    also: &[&str],
) -> std::io::Result<(Instant, Instant)> {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Basic YWRtaW46\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let sent = Instant::now();
    connection.get_mut().write_all(request.as_bytes()).await?;
    let mut line = String::new();
    connection.read_line(&mut line).await?;
    let status = line.trim().to_string();
    let code = status.split(' ').nth(1).unwrap_or("");
    let ok = code.starts_with('2') || also.contains(&code);
    let mut length = 0usize;
    loop {
        line.clear();
        connection.read_line(&mut line).await?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let acknowledged = Instant::now();
    let mut answer = vec![0; length];
    connection.read_exact(&mut answer).await?;
    if !ok {
        let text = String::from_utf8_lossy(&answer);
        return Err(std::io::Error::other(format!("{path}: {status} {text}")));
    }
    Ok((sent, acknowledged))
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((fraction * sorted.len() as f64).round() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

#[tokio::main]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(options).await {
        eprintln!("flagpole-fanout: {e}");
        std::process::exit(1);
    }
}

async fn run(options: Options) -> std::io::Result<()> {
    let mut admin = BufReader::new(TcpStream::connect(options.server).await?);
    // The toggle, created off (a second run finds it there: 403, as Unleash answers, is fine).
    let toggle = format!("{{\"name\":\"{TOGGLE}\",\"strategies\":[{{\"name\":\"default\"}}]}}");
    admin_post(&mut admin, "/api/admin/features", &toggle, &["403", "409"]).await?;

    let started = Instant::now();
    let streams: Vec<Arrivals> = (0..options.connections)
        .map(|_| Arrivals::default())
        .collect();
    for (i, arrivals) in streams.iter().enumerate() {
        let source = IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            0,
            2 + (i % options.sources as usize) as u8,
        ));
        let (server, token, arrivals) = (options.server, options.token.clone(), arrivals.clone());
        tokio::spawn(async move {
            if let Err(e) = hold_stream(server, source, token, arrivals).await {
                eprintln!("a stream ended: {e}");
            }
        });
        if i % 500 == 499 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let received = |arrivals: &Arrivals| arrivals.lock().map(|seen| seen.len()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(300);
    while streams.iter().any(|s| received(s) == 0) {
        if Instant::now() > deadline {
            return Err(std::io::Error::other(
                "not every stream was hydrated within 300 s",
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "{{\"measure\": \"held\", \"connections\": {}, \"connectSeconds\": {:.2}}}",
        options.connections,
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    for write in 0..options.writes {
        let marks: Vec<usize> = streams.iter().map(received).collect();
        let switch = if write % 2 == 0 { "on" } else { "off" };
        let path = format!("/api/admin/features/{TOGGLE}/toggle/{switch}");
        let (sent, acknowledged) = admin_post(&mut admin, &path, "", &[]).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && streams.iter().zip(&marks).any(|(s, m)| received(s) == *m)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // From the acknowledgement (an event that came first counts 0) and from the request.
        let arrivals: Vec<Instant> = streams
            .iter()
            .zip(&marks)
            .filter_map(|(s, m)| s.lock().ok()?.get(*m).map(|(_, at)| *at))
            .collect();
        let sorted_ms = |from: Instant| {
            let mut delays: Vec<f64> = arrivals
                .iter()
                .map(|at| at.saturating_duration_since(from).as_secs_f64() * 1000.0)
                .collect();
            delays.sort_by(f64::total_cmp);
            delays
        };
        let (after_ack, after_request) = (sorted_ms(acknowledged), sorted_ms(sent));
        if arrivals.is_empty() {
            println!(
                "{{\"measure\": \"one-write\", \"received\": 0, \"of\": {}}}",
                streams.len()
            );
        } else {
            println!(
                "{{\"measure\": \"one-write\", \"received\": {}, \"of\": {}, \"p50Ms\": {:.1}, \
                 \"p99Ms\": {:.1}, \"maxMs\": {:.1}, \"fromRequest\": {{\"p50Ms\": {:.1}, \
                 \"p99Ms\": {:.1}, \"maxMs\": {:.1}}}, \"writeMs\": {:.1}}}",
                arrivals.len(),
                streams.len(),
                percentile(&after_ack, 0.5),
                percentile(&after_ack, 0.99),
                after_ack[after_ack.len() - 1],
                percentile(&after_request, 0.5),
                percentile(&after_request, 0.99),
                after_request[after_request.len() - 1],
                acknowledged.duration_since(sent).as_secs_f64() * 1000.0
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if options.hold_seconds > 0 {
        // Streams kept open, e.g. while the client path is measured beside them.
        println!(
            "{{\"measure\": \"holding\", \"seconds\": {}}}",
            options.hold_seconds
        );
        tokio::time::sleep(Duration::from_secs(options.hold_seconds)).await;
        let open = OPEN.load(Ordering::Relaxed);
        println!("{{\"measure\": \"held-after\", \"streamsOpen\": {open}}}");
    }
    Ok(())
}
