//! Network namespaces for tests that cut a link's path: a namespace per
//! test (named after the process id), joined to the root namespace by veth
//! pairs, deleted (with its interfaces) on drop. Needs root, as CI runs.

use std::path::Path;
use std::process::Command;

/// `program` as a command, run in `netns` when given (`ip netns exec`,
/// which execs the program: the child's pid is the program's own).
pub fn command(netns: Option<&str>, program: &Path) -> Command {
    match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (apt package iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
pub struct Netns {
    name: String,
}

/// One veth pair between the root namespace and a [`Netns`], each end
/// with an address of a /30.
pub struct Veth {
    /// The end inside the namespace.
    pub inner: String,
    /// Its address.
    pub inner_addr: String,
    /// The end in the root namespace.
    pub outer: String,
    /// Its address.
    pub outer_addr: String,
}

impl Netns {
    /// Creates namespace `ml<tag><pid>` with its loopback up.
    pub fn create(tag: &str) -> Netns {
        let name = format!("ml{tag}{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `args` inside the namespace (`ip netns exec`): its exit code
    /// (-1 when killed by a signal), stdout and stderr.
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .expect("run ip netns exec");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `args` inside the namespace; panics if it fails.
    pub fn exec(&self, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// Adds veth pair number `index` (0-63): `10.A.B.(4i+1)/30` outside,
    /// `10.A.B.(4i+2)/30` inside, with A.B from the process id.
    pub fn veth(&self, index: u8) -> Veth {
        assert!(index < 64);
        let pid = std::process::id();
        let (a, b) = ((pid >> 8) % 250 + 1, pid % 256);
        let base = u32::from(index) * 4;
        let outer = format!("v{index}o{pid}");
        let inner = format!("v{index}i{pid}");
        let outer_addr = format!("10.{a}.{b}.{}", base + 1);
        let inner_addr = format!("10.{a}.{b}.{}", base + 2);
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip(&["link", "set", &inner, "netns", &self.name]);
        ip(&["addr", "add", &format!("{outer_addr}/30"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        self.exec(&[
            "ip",
            "addr",
            "add",
            &format!("{inner_addr}/30"),
            "dev",
            &inner,
        ]);
        self.exec(&["ip", "link", "set", &inner, "up"]);
        Veth {
            inner,
            inner_addr,
            outer,
            outer_addr,
        }
    }

    /// Takes interface `dev` inside the namespace down (`up: false`) or up.
    pub fn set_link(&self, dev: &str, up: bool) {
        self.exec(&["ip", "link", "set", dev, if up { "up" } else { "down" }]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
