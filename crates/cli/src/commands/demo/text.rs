//! The demo's files, printed instructions and small helpers.

use super::*;

// === files and text ===

/// The resources the demo applies (also written to `<data-dir>/demo.yaml`).
pub(super) fn demo_yaml(p: &Ports) -> String {
    format!(
        r#"# Applied by `meshlink demo`; apply it again to restore the demo's resources.
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {{name: default}}
spec:
  mtls:
    enabledBackend: ca-1
    # 2-minute workload certificates, so you can watch them rotate.
    backends: [{{name: ca-1, type: builtin, dpCert: {{rotation: {{expiration: 2m}}}}}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: web, mesh: default}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {wi}, servicePort: {wa}, tags: {{kuma.io/service: web}}}}]
    outbound:
      - {{port: {wo}, tags: {{kuma.io/service: backend}}}}
      # mesh to network: site B's service, through this site's router
      - {{port: {wb}, routingKey: {ROUTING_KEY}}}
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {{name: backend, mesh: default}}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{{port: {bi}, servicePort: {ba}, tags: {{kuma.io/service: backend}}}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {{name: {MTP_NAME}, mesh: default}}
spec:
  targetRef: {{kind: MeshService, name: backend}}
  from:
    - targetRef: {{kind: MeshService, name: web}}
      default: {{action: Allow}}
"#,
        wi = p.web_inbound,
        wo = p.web_outbound,
        wb = p.web_to_b,
        bi = p.backend_inbound,
        wa = p.web_app,
        ba = p.backend_app,
    )
}

/// Prints the commands to try; every one works as typed, also pasted as
/// one block (a command that changes policy is followed by a loop that
/// waits until the change has reached the sidecar).
pub(super) fn print_try(dir: &Path, p: &Ports) {
    let cli = cli_command();
    let url = format!("http://127.0.0.1:{}/", p.web_outbound);
    let url_b = format!("http://127.0.0.1:{}/", p.web_to_b);
    let token = sh_quote(&dir.join("admin-token").display().to_string());
    let yaml = sh_quote(&dir.join("demo.yaml").display().to_string());
    println!(
        r#"
The demo (logs in {logs}):
  site A, 127.0.0.1
    control plane  REST API :{api}, xDS :{xds}, console http://127.0.0.1:{api}/
    web            app :{wapp}, sidecar inbound :{wi} (mTLS), outbound to backend :{wo}, to site B :{wb}, admin :{wa}
    backend        app :{bapp}, sidecar inbound :{bi} (mTLS), admin :{ba}
    router         link port :{link}, listener {key} :{lst}, admin :{ra}
  site B, {bhost}
    control plane  REST API :{bapi}, xDS :{bxds}
    router         dials site A, admin :{rb}
    app            :{bappb}, exposed as routing key {key}
  Workload certificates live 2 minutes: watch them rotate with `get dataplanes`.

Try this from another terminal:

  # web's outbound: web's sidecar calls backend's sidecar over mTLS
  curl {url}
  # across the sites: web's sidecar -> site A's router -> link -> site B's router -> site B's app
  curl {url_b}

  # the CLI, pointed at site A's control plane (the console at http://127.0.0.1:{api}/ takes the same token)
  export MESHLINK_SERVER=http://127.0.0.1:{api} MESHLINK_TOKEN="$(cat {token})"
  {cli} get dataplanes
  {cli} inspect dataplane web
  {cli} network status
  curl -s http://127.0.0.1:{wa}/config_dump

  # take the permission away: backend's sidecar now refuses web (the loop waits until it does)
  {cli} delete mtp {MTP_NAME} -m default
  until ! curl -sf {url} >/dev/null; do sleep 0.2; done
  curl {url}
  curl -s http://127.0.0.1:{ba}/metrics | grep rbac

  # allow it again (the loop waits until it works)
  {cli} apply -f {yaml}
  until curl -sf {url} >/dev/null; do sleep 0.2; done
  curl {url}
"#,
        logs = dir.join("logs").display(),
        api = p.api,
        xds = p.xds,
        wapp = p.web_app,
        bapp = p.backend_app,
        wi = p.web_inbound,
        wo = p.web_outbound,
        wb = p.web_to_b,
        bi = p.backend_inbound,
        wa = p.web_admin,
        ba = p.backend_admin,
        link = p.a_link,
        key = ROUTING_KEY,
        lst = p.a_listener,
        ra = p.a_router_admin,
        bhost = SITE_B_HOST,
        bapi = p.b_api,
        bxds = p.b_xds,
        rb = p.b_router_admin,
        bappb = p.b_app,
    );
    println!(
        "ready: curl {url} answers {:?}; curl {url_b} answers {:?}; press Ctrl-C to stop",
        BACKEND_BODY.trim(),
        SITE_B_BODY.trim()
    );
}

/// Writes `--ready-file` (atomically): the addresses a script needs.
pub(super) fn write_ready_file(path: Option<&Path>, dir: &Path, p: &Ports) -> Result<(), Failure> {
    let Some(path) = path else {
        return Ok(());
    };
    let v = json!({
        "dataDir": dir,
        "adminTokenFile": dir.join("admin-token"),
        "server": format!("http://127.0.0.1:{}", p.api),
        "console": format!("http://127.0.0.1:{}/", p.api),
        "siteBServer": format!("http://{SITE_B_HOST}:{}", p.b_api),
        "siteBAdminTokenFile": dir.join("site-b").join("admin-token"),
        "mesh": format!("http://127.0.0.1:{}/", p.web_outbound),
        "acrossSites": format!("http://127.0.0.1:{}/", p.web_to_b),
        "siteARouterAdmin": format!("http://127.0.0.1:{}", p.a_router_admin),
        "siteBRouterAdmin": format!("http://127.0.0.1:{}", p.b_router_admin),
        "webAdmin": format!("http://127.0.0.1:{}", p.web_admin),
        "backendAdmin": format!("http://127.0.0.1:{}", p.backend_admin),
    });
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{v}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Failure::Runtime(format!("cannot write --ready-file {}: {e}", path.display())))
}

/// How to type this `meshlink`: its name when PATH finds this very file,
/// else its path (relative to the working directory when inside it).
pub(super) fn cli_command() -> String {
    let Ok(exe) = std::env::current_exe().and_then(|e| e.canonicalize()) else {
        return "meshlink".into();
    };
    if on_path("meshlink")
        .and_then(|p| p.canonicalize().ok())
        .as_deref()
        == Some(exe.as_path())
    {
        return "meshlink".into();
    }
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| exe.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| exe.clone());
    let shown = if shown.components().count() == 1 {
        format!("./{}", shown.display())
    } else {
        shown.display().to_string()
    };
    sh_quote(&shown)
}

pub(super) fn sh_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:=@,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

pub(super) fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The binary next to this executable, else on PATH.
pub(super) fn find_binary(name: &str) -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Runtime(format!("cannot locate the meshlink executable: {e}")))?;
    if let Some(p) = exe.parent().map(|d| d.join(name)).filter(|p| p.is_file()) {
        return Ok(p);
    }
    on_path(name).ok_or_else(|| {
        Failure::Runtime(format!(
            "cannot find {name}: it is neither next to {} nor on PATH. Build every binary with \
             `cargo build --release --bins` and run the meshlink built with it (target/release/meshlink demo)",
            exe.display()
        ))
    })
}

/// Creates the data dir with `logs/` and `tokens/`; returns its absolute path.
pub(super) fn prepare_dir(dir: &Path) -> Result<PathBuf, Failure> {
    for sub in ["logs", "tokens"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| {
            Failure::Runtime(format!(
                "cannot create {}: {e}; pass another --data-dir",
                dir.join(sub).display()
            ))
        })?;
    }
    dir.canonicalize()
        .map_err(|e| Failure::Runtime(format!("cannot resolve {}: {e}", dir.display())))
}

/// Takes `<dir>/demo.lock` so two demos never share a data dir.
pub(super) fn lock_dir(dir: &Path) -> Result<std::fs::File, Failure> {
    let path = dir.join("demo.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Failure::Runtime(format!("cannot open {}: {e}", path.display())))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Failure::Runtime(format!(
            "another meshlink demo is running with data dir {}; stop it (Ctrl-C in its terminal) or pass another --data-dir",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Failure::Runtime(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

/// `run` followed by each flag and its value.
pub(super) fn flags(pairs: &[(&str, String)]) -> Vec<String> {
    let pairs = pairs.iter().flat_map(|(f, v)| [f.to_string(), v.clone()]);
    std::iter::once("run".to_string()).chain(pairs).collect()
}

/// The last `n` lines of a log file.
pub(super) fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The innermost cause of a request error (e.g. "Connection refused").
pub(super) fn cause(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = src {
        msg = s.to_string();
        src = s.source();
    }
    msg
}
