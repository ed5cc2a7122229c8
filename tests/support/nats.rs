//! Real `nats-server` processes for the tests: one JetStream server, or a three-node JetStream
//! cluster, on free loopback ports with their stores in a scratch folder. Needs `nats-server`
//! on the PATH (`apt-get install nats-server`; `.ci/run` installs it); without it the test
//! fails saying so.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to listen.
const PATIENCE: Duration = Duration::from_secs(40);

/// A child process killed (SIGKILL) when dropped.
pub struct Process(pub Child);

impl Process {
    /// Kills it now (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(args: &[String], port: u16) -> Process {
    try_spawn(args, port).unwrap_or_else(|| {
        panic!("nats-server exited at start on port {port} (is the port taken?)")
    })
}

/// [`spawn`], or `None` when the server exits at start (its port was taken meanwhile by
/// another test's server, which then answered in its place).
fn try_spawn(args: &[String], port: u16) -> Option<Process> {
    let mut child = Command::new("nats-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start nats-server ({e}): install it, `apt-get install nats-server` on Debian, or put a nats-server 2.9+ binary on the PATH")
        });
    let until = Instant::now() + PATIENCE;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < until,
            "nats-server did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The port answers: make sure it is this server that does.
    std::thread::sleep(Duration::from_millis(100));
    if child.try_wait().ok().flatten().is_some() {
        return None;
    }
    Some(Process(child))
}

/// `nats-server -js` on a free port, its store in `dir/js`.
pub fn server(dir: &Path) -> (Process, String) {
    // A free port can be taken by another test's server before this one binds it: another.
    for _ in 0..4 {
        let port = free_port();
        if let Some(process) = try_spawn(&server_args(dir, port), port) {
            return (process, format!("nats://127.0.0.1:{port}"));
        }
    }
    server_on(dir, free_port())
}

fn server_args(dir: &Path, port: u16) -> Vec<String> {
    ["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"]
        .map(str::to_owned)
        .into_iter()
        .chain([dir.join("js").display().to_string()])
        .collect()
}

/// `nats-server -js` on `port`, its store in `dir/js` (what a restart finds again).
pub fn server_on(dir: &Path, port: u16) -> (Process, String) {
    let args = server_args(dir, port);
    (spawn(&args, port), format!("nats://127.0.0.1:{port}"))
}

/// A three-node JetStream cluster on loopback: its servers (in order), their client URLs, and
/// all three URLs comma-separated (what a client is given).
pub struct Cluster {
    /// The servers; kill one with [`Process::kill`].
    pub nodes: Vec<Process>,
    /// Each node's client URL.
    pub urls: Vec<String>,
}

impl Cluster {
    /// Starts three nodes in `dir/node-N`, routed to each other.
    pub fn start(dir: &Path) -> Self {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes = ports
            .iter()
            .map(|(_, c)| format!("nats://127.0.0.1:{c}"))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = ports
            .iter()
            .enumerate()
            .map(|(i, (p, c))| {
                let args = [
                    "-js".to_owned(),
                    "-a".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    p.to_string(),
                    "-n".into(),
                    format!("node-{i}"),
                    "--cluster_name".into(),
                    "agentpump-test".into(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{c}"),
                    "--routes".into(),
                    routes.clone(),
                    "-sd".into(),
                    dir.join(format!("node-{i}")).display().to_string(),
                ];
                spawn(&args, *p)
            })
            .collect();
        let urls = ports
            .iter()
            .map(|(p, _)| format!("nats://127.0.0.1:{p}"))
            .collect();
        Self { nodes, urls }
    }

    /// Every node's URL, comma-separated.
    pub fn url(&self) -> String {
        self.urls.join(",")
    }

    /// Waits until the servers have elected their leaders: a three-replica stream opened on
    /// them (its creation retried while they elect). Hosts started before may take each
    /// other's partitions while the cluster answers slowly, or fail to open their stream.
    #[cfg(feature = "nats")]
    pub async fn elected(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut options = agentpump::history::JetStreamOptions::new(self.url(), "warm-up");
            options.replicas = 3;
            match agentpump::history::JetStreamHistory::open(options).await {
                Ok(_) => return,
                Err(e) if Instant::now() < deadline => eprintln!("while the cluster elects: {e}"),
                Err(e) => panic!("the cluster never elected its leaders: {e}"),
            }
        }
    }
}
