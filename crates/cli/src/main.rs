//! `meshlink`: the command-line interface (DESIGN.md §5, docs/cli.md).

mod client;
mod commands;
mod failure;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use meshlink_api::Kind;

use client::{ApiClient, TokenSource};
use commands::get::Output;
use commands::inspect::Format as InspectFormat;
use failure::Failure;

#[derive(Parser)]
#[command(
    name = "meshlink",
    version,
    about = "meshlink: service mesh and multi-site network"
)]
struct Cli {
    /// Control-plane REST API URL.
    #[arg(
        long,
        global = true,
        env = "MESHLINK_SERVER",
        default_value = "http://127.0.0.1:5681"
    )]
    server: String,
    /// Admin token [default: contents of ./meshlink-data/admin-token].
    #[arg(long, global = true, env = "MESHLINK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Applies multi-document YAML (canonical, Kuma or Skupper format).
    Apply {
        /// File to apply, or - for standard input.
        #[arg(short = 'f', long = "filename")]
        file: String,
        /// Check everything and write nothing: print what each document
        /// would do and which proxies' computed L7 rules would change, and
        /// how.
        #[arg(long)]
        dry_run: bool,
    },
    /// Shows resources.
    Get {
        /// Kind: mesh, dataplane (dp), meshtrafficpermission (mtp), site, ..., or controlplanes (the replicas)
        kind: String,
        /// One resource's name; all when omitted.
        name: Option<String>,
        /// Mesh of mesh-scoped kinds [default for one resource: default; for lists: all].
        #[arg(short = 'm', long)]
        mesh: Option<String>,
        /// Label selector, e.g. env=prod,tier!=db.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Fetch lists in pages of this many resources (the API's `limit`,
        /// at most 1000); 0 fetches the whole list in one request.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(0..=1000))]
        chunk_size: u32,
    },
    /// Deletes a resource.
    Delete {
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// Mesh of mesh-scoped kinds (default: default), or of a Kuma
        /// mesh-scoped Secret (a Secret without it is a global one).
        #[arg(short = 'm', long)]
        mesh: Option<String>,
        /// Also delete everything that uses the resource (a Mesh's
        /// Dataplanes and policies, a Site's RouterAccess, Listeners,
        /// grants and Links, ...), users first. Without it, a resource in
        /// use is refused, naming its users.
        #[arg(long)]
        cascade: bool,
    },
    /// Shows a proxy's xDS connection as the control plane sees it.
    #[command(subcommand)]
    Inspect(InspectCommand),
    /// Issues and revokes proxy tokens; issues and redeems site-link tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Site links.
    #[command(subcommand)]
    Link(LinkCommand),
    /// The multi-site network.
    #[command(subcommand)]
    Network(NetworkCommand),
    /// Waits for a condition on a resource.
    Wait {
        /// KIND/NAME, e.g. dataplane/web-1.
        target: String,
        /// condition=TYPE or condition=TYPE=STATUS.
        #[arg(long = "for")]
        for_: String,
        /// Mesh of mesh-scoped kinds.
        #[arg(short = 'm', long, default_value = "default")]
        mesh: String,
        /// How long to wait, e.g. 60s or 5m.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Starts a complete local mesh (control plane, two apps, two sidecars),
    /// prints what to try, and stops everything on Ctrl-C.
    Demo(commands::demo::DemoArgs),
    /// Installs host-side pieces of the mesh in this machine or network
    /// namespace.
    #[command(subcommand)]
    Install(InstallCommand),
    /// Removes what `meshlink install` installed.
    #[command(subcommand)]
    Uninstall(UninstallCommand),
}

#[derive(Subcommand)]
enum InstallCommand {
    /// Writes iptables NAT rules in this network namespace that redirect
    /// the app's TCP traffic (and with --redirect-dns its DNS) to the
    /// sidecar's capture ports, like `kumactl install transparent-proxy`.
    /// Re-running replaces the rules. Needs CAP_NET_ADMIN.
    TransparentProxy(commands::transparent_proxy::InstallArgs),
}

#[derive(Subcommand)]
enum UninstallCommand {
    /// Removes exactly the rules `meshlink install transparent-proxy`
    /// wrote in this network namespace (a no-op when there are none).
    /// Needs CAP_NET_ADMIN.
    TransparentProxy,
}

#[derive(Subcommand)]
enum InspectCommand {
    /// Connection, certificate serial and expiry, per-type versions sent,
    /// ACKed and NACKed, and with --config-dump the resources sent.
    #[command(visible_alias = "dp", alias = "dataplanes")]
    Dataplane {
        /// Dataplane name.
        name: String,
        /// Mesh of the dataplane.
        #[arg(short = 'm', long, default_value = "default")]
        mesh: String,
        /// Print instead the resources this control plane sends the proxy,
        /// in the shape of Envoy's admin /config_dump (JSON, or YAML with
        /// -o yaml; private keys redacted).
        #[arg(long, conflicts_with = "rules")]
        config_dump: bool,
        /// Print instead the rules the L7 policies that select this
        /// Dataplane give it (MeshHTTPRoute, MeshTCPRoute, MeshTimeout,
        /// MeshRetry), with the policy that set each field.
        #[arg(long)]
        rules: bool,
        /// Output format: a human summary (the default), or the API body as
        /// JSON or YAML. With --config-dump: json (the default) or yaml.
        #[arg(short = 'o', long, value_enum)]
        output: Option<InspectFormat>,
    },
}

#[derive(Subcommand)]
enum NetworkCommand {
    /// Prints the sites in the network, this site's links with their state
    /// and cost, and the services by routing key (what `skupper network
    /// status` showed).
    Status {
        /// `json` prints this site's Site and Links as JSON instead.
        #[arg(short = 'o', long)]
        output: Option<String>,
    },
}

#[derive(Subcommand)]
enum LinkCommand {
    /// Prints a Secret and Link YAML that lets another site link to this
    /// one (like `skupper link generate`); apply it there with `meshlink apply -f -`.
    Generate {
        /// Name of the Secret and Link [default: link-<site>].
        #[arg(long)]
        name: Option<String>,
        /// Subject (CN) of the client certificate [default: the name].
        #[arg(long)]
        subject: Option<String>,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Creates an AccessGrant (unless --grant names one), waits until it is
    /// Ready, and writes an AccessToken YAML to FILE for another site.
    Issue {
        /// Where to write the AccessToken (mode 0600: it holds the code).
        file: String,
        /// Use this existing AccessGrant instead of creating one.
        #[arg(long)]
        grant: Option<String>,
        /// Redemptions the new grant allows [Skupper's default: 1].
        #[arg(long)]
        redemptions: Option<u64>,
        /// How long the new grant stays redeemable, e.g. 1h [Skupper's default: 15m].
        #[arg(long)]
        expiration_window: Option<String>,
    },
    /// Applies an AccessToken file, waits until it is redeemed, then until
    /// its Link is Operational (which needs this site's router).
    Redeem {
        /// The AccessToken file (`-` for standard input).
        file: String,
        /// How long to wait for the redemption.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// How long to wait for the Link to be Operational; 0s skips the wait.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        link_timeout: Duration,
    },
    /// Prints a token a dataplane proxy uses to authenticate (xDS, Certify).
    Dataplane {
        /// Mesh of the dataplane.
        #[arg(long)]
        mesh: String,
        /// Dataplane name.
        #[arg(long)]
        name: String,
        /// Service the token allows (repeatable) [default: the Dataplane's inbound services].
        #[arg(long = "service")]
        services: Vec<String>,
        /// Lifetime, e.g. 24h.
        #[arg(long, default_value = "24h")]
        valid_for: String,
        /// Also write tls.crt, tls.key and ca.crt here: a client certificate for
        /// the xDS port bound to this dataplane (for clients that cannot send a token).
        #[arg(long)]
        cert_dir: Option<std::path::PathBuf>,
    },
    /// Prints the token this site's router uses to authenticate (xDS and
    /// router status); its xDS node.id is `site.<site name>`.
    Router {
        /// The site [default: the one Site this control plane holds].
        #[arg(long)]
        site: Option<String>,
        /// Lifetime, e.g. 24h.
        #[arg(long, default_value = "24h")]
        valid_for: String,
    },
    /// Revokes a token by its id (printed when it was issued).
    Revoke {
        /// Token id.
        id: String,
        /// Why, for the record.
        #[arg(long, default_value = "")]
        reason: String,
        /// Revoke even if the control plane has no record of issuing this id
        /// (tokens issued before token ids were recorded).
        #[arg(long)]
        force: bool,
    },
}

fn kind(s: &str) -> Result<Kind, Failure> {
    s.parse::<Kind>()
        .map_err(|e| Failure::BadInput(e.to_string()))
}

fn default_token() -> Option<(String, TokenSource)> {
    let path = Path::new("meshlink-data").join("admin-token");
    std::fs::read_to_string(&path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .map(|t| (t, TokenSource::File(path.display().to_string())))
}

/// Where `--server` and `--token` came from, for error messages.
struct Sources {
    server: &'static str,
    token: TokenSource,
}

fn source_name(src: Option<ValueSource>, flag: &'static str, env: &'static str) -> &'static str {
    match src {
        Some(ValueSource::EnvVariable) => env,
        Some(ValueSource::CommandLine) => flag,
        _ => "the default",
    }
}

/// Refuses a `--server` that is not an http(s) URL, suggesting the fix.
fn check_server(server: &str, from: &str) -> Result<(), Failure> {
    if server.starts_with("http://") || server.starts_with("https://") {
        return Ok(());
    }
    let hint = match server.split_once("://") {
        Some((_, rest)) => format!("http://{rest}"),
        None => format!("http://{server}"),
    };
    Err(Failure::BadInput(format!(
        "{from} {server:?} is not an http:// or https:// URL; did you mean {hint}?"
    )))
}

async fn run(cli: Cli, sources: Sources) -> Result<(), Failure> {
    // install/uninstall change this host's rules and talk to no control
    // plane: --server and --token do not apply to them.
    if !matches!(cli.command, Command::Install(_) | Command::Uninstall(_)) {
        check_server(&cli.server, sources.server)?;
    }
    let token = match cli.token {
        Some(t) => Some((t, sources.token)),
        None => default_token(),
    };
    let client = ApiClient::new(&cli.server, token);
    match cli.command {
        Command::Apply { file, dry_run } => commands::apply::run(&client, &file, dry_run).await,
        Command::Get {
            kind: k,
            name,
            mesh,
            selector,
            output,
            chunk_size,
        } if commands::controlplanes::is_controlplanes(&k) => {
            if name.is_some() || mesh.is_some() || selector.is_some() {
                return Err(Failure::BadInput(
                    "get controlplanes takes no name, --mesh or --selector; it lists every replica"
                        .into(),
                ));
            }
            let _ = chunk_size;
            commands::controlplanes::run(&client, output).await
        }
        Command::Get {
            kind: k,
            name,
            mesh,
            selector,
            output,
            chunk_size,
        } => {
            let k = kind(&k)?;
            let mesh = match (&name, mesh) {
                (Some(_), None) if k.is_mesh_scoped() => Some("default".to_string()),
                (_, m) => m,
            };
            commands::get::run(
                &client,
                k,
                name.as_deref(),
                mesh.as_deref(),
                selector.as_deref(),
                output,
                chunk_size,
            )
            .await
        }
        Command::Delete {
            kind: k,
            name,
            mesh,
            cascade,
        } => {
            let k = kind(&k)?;
            let mesh = mesh.or_else(|| k.is_mesh_scoped().then(|| "default".to_string()));
            commands::delete::run(&client, k, &name, mesh.as_deref(), cascade).await
        }
        Command::Inspect(InspectCommand::Dataplane {
            name,
            mesh,
            rules: true,
            output,
            ..
        }) => commands::inspect_rules::rules(&client, &name, &mesh, output).await,
        Command::Inspect(InspectCommand::Dataplane {
            name,
            mesh,
            config_dump,
            output,
            ..
        }) => commands::inspect::dataplane(&client, &name, &mesh, config_dump, output).await,
        Command::Token(TokenCommand::Dataplane {
            mesh,
            name,
            services,
            valid_for,
            cert_dir,
        }) => {
            commands::token::dataplane(
                &client,
                &mesh,
                &name,
                &services,
                &valid_for,
                cert_dir.as_deref(),
            )
            .await
        }
        Command::Token(TokenCommand::Router { site, valid_for }) => {
            commands::token::router(&client, site.as_deref(), &valid_for).await
        }
        Command::Token(TokenCommand::Issue {
            file,
            grant,
            redemptions,
            expiration_window,
        }) => {
            commands::grant::issue(
                &client,
                &file,
                grant.as_deref(),
                redemptions,
                expiration_window.as_deref(),
            )
            .await
        }
        Command::Token(TokenCommand::Redeem {
            file,
            timeout,
            link_timeout,
        }) => commands::grant::redeem(&client, &file, timeout, link_timeout).await,
        Command::Network(NetworkCommand::Status { output }) => {
            commands::network::status(&client, output.as_deref()).await
        }
        Command::Link(LinkCommand::Generate { name, subject }) => {
            commands::grant::link_generate(&client, name.as_deref(), subject.as_deref()).await
        }
        Command::Token(TokenCommand::Revoke { id, reason, force }) => {
            commands::token::revoke(&client, &id, &reason, force).await
        }
        Command::Wait {
            target,
            for_,
            mesh,
            timeout,
        } => {
            let (k, name) = commands::wait::parse_target(&target)?;
            let w = commands::wait::parse_for(&for_)?;
            commands::wait::run(&client, k, &name, Some(&mesh), &w, timeout).await
        }
        Command::Demo(args) => commands::demo::run(args).await,
        Command::Install(InstallCommand::TransparentProxy(args)) => {
            commands::transparent_proxy::install(&args)
        }
        Command::Uninstall(UninstallCommand::TransparentProxy) => {
            commands::transparent_proxy::uninstall()
        }
    }
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let sources = Sources {
        server: source_name(
            matches.value_source("server"),
            "--server",
            "MESHLINK_SERVER",
        ),
        token: match matches.value_source("token") {
            Some(ValueSource::EnvVariable) => TokenSource::Env,
            _ => TokenSource::Flag,
        },
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cli, sources)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {f}");
            ExitCode::from(f.exit_code())
        }
    }
}
