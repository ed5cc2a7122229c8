//! Headless Chromium under chromedriver, and `agentpump view` as a child process, for
//! `tests/viewer.rs`. Both processes are killed when their guard drops.

use std::io::BufRead as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::support::Scratch;

/// How long a condition may take to come true in the page.
const PATIENCE: Duration = Duration::from_secs(15);

/// A program the test needs, from `env` or the first existing candidate; fails loudly if none.
/// Where screenshots go: `docs/` with `AGENTPUMP_SCREENSHOTS=docs` (the README's and the
/// docs' pictures, taken from today's page), else the scratch folder.
pub fn shots(scratch: &Scratch) -> PathBuf {
    if std::env::var("AGENTPUMP_SCREENSHOTS").as_deref() == Ok("docs") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
    } else {
        scratch.0.clone()
    }
}

fn program(env: &str, candidates: &[&str], package: &str) -> PathBuf {
    if let Ok(path) = std::env::var(env) {
        return PathBuf::from(path);
    }
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{} not found: the viewer test needs a real browser. Install it \
                 (Debian: apt-get install -y chromium chromium-driver; .ci/run does) or set {env}. \
                 Missing package: {package}",
                candidates[0]
            )
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills and reaps a child process when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A WebDriver session in headless Chromium.
pub struct Browser {
    client: Client,
    /// Ends the session (the browser quits), then stops chromedriver, also when a test fails.
    session: Session,
}

/// A chromedriver and its session. Chromium is chromedriver's child: killing chromedriver alone
/// would leave the browser running after a failed test, so the session is deleted first.
struct Session {
    port: u16,
    id: Option<String>,
    _driver: Reaped,
}

impl Drop for Session {
    fn drop(&mut self) {
        use std::io::{Read as _, Write as _};
        let Some(id) = &self.id else { return };
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let request = format!(
            "DELETE /session/{id} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        );
        if stream.write_all(request.as_bytes()).is_ok() {
            let _ = stream.read_to_end(&mut Vec::new());
        }
    }
}

impl Browser {
    /// Starts chromedriver and a fresh headless Chromium profile inside `scratch`, in a light
    /// or (`dark`) a dark system colour scheme.
    pub async fn start(scratch: &Scratch, dark: bool) -> Self {
        let driver = program(
            "CHROMEDRIVER",
            &["/usr/bin/chromedriver"],
            "chromium-driver",
        );
        let chromium = program("CHROMIUM", &["/usr/bin/chromium"], "chromium");
        let port = free_port();
        let scheme = if dark { "dark" } else { "light" };
        let log =
            std::fs::File::create(scratch.0.join(format!("chromedriver-{scheme}.log"))).unwrap();
        let driver = Reaped(
            Command::new(&driver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("{}: cannot start: {e}", driver.display())),
        );
        let profile = scratch.0.join(format!("chromium-profile-{scheme}"));
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", profile.display()),
        ];
        if dark {
            args.push("--force-dark-mode".into());
            args.push("--blink-settings=preferredColorScheme=0".into());
        }
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": args,
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!("a JSON object")
        };
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            agentpump::listeners::llm::install_tls_provider();
            let attempt = ClientBuilder::rustls()
                .unwrap()
                .capabilities(caps.clone())
                .connect(&url)
                .await;
            match attempt {
                Ok(client) => break client,
                Err(e) if started.elapsed() < Duration::from_secs(20) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!(
                    "no WebDriver session from chromedriver at {url}: {e}; see {}",
                    scratch
                        .0
                        .join(format!("chromedriver-{scheme}.log"))
                        .display()
                ),
            }
        };
        let session = Session {
            port,
            id: client.session_id().await.unwrap(),
            _driver: driver,
        };
        client.set_window_size(1280, 900).await.unwrap();
        Self { client, session }
    }

    /// Resizes the window to `width` × `height` CSS pixels.
    pub async fn resize(&self, width: u32, height: u32) {
        self.client.set_window_size(width, height).await.unwrap();
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Runs `script` (a function body; a returned promise is awaited) and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Waits until the JS expression `condition` is true; fails naming `what`, with the page's
    /// status line and recorded errors.
    pub async fn until(&self, what: &str, condition: &str) {
        let started = Instant::now();
        let script = format!("try {{ return !!({condition}); }} catch (e) {{ return false; }}");
        while started.elapsed() < PATIENCE {
            if self.eval(&script).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let page = self
            .eval("return [location.href, document.getElementById('status')?.textContent, window.viewerErrors]")
            .await;
        panic!("the page never showed {what} ({condition}); page: {page}");
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.unwrap().len()
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Replaces the text of the input matching `css` by typing `text`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let input = self.client.find(Locator::Css(css)).await.unwrap();
        input.clear().await.unwrap();
        input.send_keys(text).await.unwrap();
    }

    /// Runs axe-core (npm, pinned; `AGENTPUMP_AXE` names its `axe.min.js`, `.ci/run` installs
    /// it) on the page as it is now and fails naming every serious or critical violation, with
    /// the elements it found, for the view called `view`.
    pub async fn axe(&self, view: &str) {
        let path = std::env::var("AGENTPUMP_AXE").unwrap_or_else(|_| {
            panic!(
                "AGENTPUMP_AXE is not set: the viewer's accessibility checks need axe-core's \
                 axe.min.js (npm install axe-core@4.14.1; .ci/run does and sets it)"
            )
        });
        let source =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("AGENTPUMP_AXE={path}: {e}"));
        if self.eval("return typeof window.axe").await != "object" {
            self.eval(&format!("{source}\n;return true")).await;
        }
        let found = self
            .eval(
                "return axe.run(document, {resultTypes: ['violations']}).then(r => r.violations\
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')\
                 .map(v => ({id: v.id, impact: v.impact, help: v.help,\
                   nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))})))",
            )
            .await;
        assert_eq!(
            found,
            json!([]),
            "axe-core found serious or critical violations in the {view} view"
        );
    }

    /// Saves a PNG of the viewport as `dir/name`.
    pub async fn screenshot(&self, dir: &Path, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }

    /// Checks that the page logged no console error (`window.viewerErrors`), then ends the
    /// session.
    pub async fn close_clean(self) {
        let errors = self.eval("return window.viewerErrors").await;
        assert_eq!(errors, serde_json::json!([]), "console errors");
        self.close().await;
    }

    /// Ends the session (the browser quits).
    pub async fn close(mut self) {
        self.client.clone().close().await.unwrap();
        self.session.id = None;
    }
}

/// `agentpump view --db FILE [ARGS…]` on a free loopback port.
pub struct View {
    /// The URL it printed (with the one-time token).
    pub url: String,
    /// `http://ADDR/`.
    pub base: String,
    _child: Reaped,
}

impl View {
    /// Starts it and reads the URL from its first line.
    pub fn start(db: &Path) -> Self {
        Self::start_with(db, &[])
    }

    /// Starts it with more arguments (`--tasks ROOT`).
    pub fn start_with(db: &Path, more: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args([
                "view",
                "--db",
                db.to_str().unwrap(),
                "--addr",
                "127.0.0.1:0",
            ])
            .args(more)
            .env_remove("AGENTPUMP_TOKEN")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let child = Reaped(child);
        let line = std::io::BufReader::new(stdout)
            .lines()
            .next()
            .unwrap()
            .unwrap();
        let url = line
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL at the end of `{line}`"))
            .to_owned();
        assert!(url.contains("/?token="), "{url}");
        let base = url.split("?token=").next().unwrap().to_owned();
        Self {
            url,
            base,
            _child: child,
        }
    }
}
