//! Validation of a connection manager's `access_log` entries: Envoy's file
//! logger (`envoy.access_loggers.file`) with a path and a `log_format` (a
//! text template, inline, or a JSON object of string templates), or
//! meshlink's TCP logger (`meshlink.v1.TcpAccessLog`: an address and a
//! text or JSON format). Every template is parsed, and an operator meshlink-proxy
//! does not implement is refused with its name. Filters on access logs,
//! other loggers and typed (non-string) JSON values are refused.

use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog as PbAccessLog, access_log};
use envoy_types::pb::envoy::config::core::v3::{data_source, substitution_format_string};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    FileAccessLog, file_access_log,
};
use envoy_types::pb::google::protobuf::value;
use meshlink_api::spec::access_log_format;
use prost::Name as _;

use super::{Invalid, decode, invalid};
use crate::model::access_log::{AccessLog, LineFormat, LogTarget};
use meshlink_proto::certify::TcpAccessLog;

/// Reads the `access_log` list at `field`.
pub(super) fn access_logs(logs: &[PbAccessLog], field: &str) -> Result<Vec<AccessLog>, Invalid> {
    logs.iter()
        .enumerate()
        .map(|(i, l)| access_log(l, &format!("{field}[{i}]")))
        .collect()
}

fn access_log(l: &PbAccessLog, field: &str) -> Result<AccessLog, Invalid> {
    if l.filter.is_some() {
        return Err(invalid(
            format!("{field}.filter"),
            "access log filters are not supported by meshlink-proxy: every request is logged",
        ));
    }
    let Some(access_log::ConfigType::TypedConfig(any)) = &l.config_type else {
        return Err(invalid(field, "no typed_config"));
    };
    if any.type_url == TcpAccessLog::type_url() {
        return tcp_access_log(any, &format!("{field}.typed_config"));
    }
    if any.type_url != FileAccessLog::type_url() {
        return Err(invalid(
            format!("{field}.typed_config"),
            format!(
                "unsupported access logger {:?}; meshlink-proxy supports envoy.access_loggers.file \
                 and meshlink.v1.TcpAccessLog",
                any.type_url
            ),
        ));
    }
    let field = format!("{field}.typed_config");
    let f: FileAccessLog = decode(any, &field)?;
    if f.path.is_empty() {
        return Err(invalid(format!("{field}.path"), "required"));
    }
    let parse =
        |template: &str, at: String| access_log_format::parse(template).map_err(|e| invalid(at, e));
    let (format, omit_empty_values) = match f.access_log_format {
        Some(file_access_log::AccessLogFormat::LogFormat(s)) => {
            let at = format!("{field}.log_format");
            let format = match s.format {
                Some(substitution_format_string::Format::TextFormatSource(ds)) => {
                    match ds.specifier {
                        Some(data_source::Specifier::InlineString(t)) => {
                            LineFormat::Text(parse(&t, format!("{at}.text_format_source"))?)
                        }
                        _ => {
                            return Err(invalid(
                                format!("{at}.text_format_source"),
                                "only inline_string is supported",
                            ));
                        }
                    }
                }
                #[allow(deprecated)]
                Some(substitution_format_string::Format::TextFormat(t)) => {
                    LineFormat::Text(parse(&t, format!("{at}.text_format"))?)
                }
                Some(substitution_format_string::Format::JsonFormat(st)) => {
                    let mut fields = Vec::new();
                    let mut keys: Vec<_> = st.fields.into_iter().collect();
                    keys.sort_by(|a, b| a.0.cmp(&b.0));
                    for (key, v) in keys {
                        let Some(value::Kind::StringValue(t)) = v.kind else {
                            return Err(invalid(
                                format!("{at}.json_format.{key}"),
                                "only string templates are supported",
                            ));
                        };
                        let tokens = parse(&t, format!("{at}.json_format.{key}"))?;
                        fields.push((key, tokens));
                    }
                    LineFormat::json(fields)
                }
                None => return Err(invalid(format!("{at}.format"), "required")),
            };
            (format, s.omit_empty_values)
        }
        _ => {
            return Err(invalid(
                format!("{field}.log_format"),
                "required (the deprecated format fields are not supported)",
            ));
        }
    };
    Ok(AccessLog::new(
        LogTarget::File(f.path),
        format,
        omit_empty_values,
    ))
}

/// Reads meshlink's TCP logger at `field`.
fn tcp_access_log(
    any: &envoy_types::pb::google::protobuf::Any,
    field: &str,
) -> Result<AccessLog, Invalid> {
    let t: TcpAccessLog = decode(any, field)?;
    let host_port = t
        .address
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
    if !host_port {
        return Err(invalid(
            format!("{field}.address"),
            format!("{:?} is not host:port", t.address),
        ));
    }
    let parse =
        |template: &str, at: String| access_log_format::parse(template).map_err(|e| invalid(at, e));
    let format = match (t.text_format.is_empty(), t.json_format.is_empty()) {
        (false, true) => LineFormat::Text(parse(&t.text_format, format!("{field}.text_format"))?),
        (true, false) => LineFormat::json(
            t.json_format
                .iter()
                .enumerate()
                .map(|(i, kv)| {
                    Ok((
                        kv.key.clone(),
                        parse(&kv.value, format!("{field}.json_format[{i}].value"))?,
                    ))
                })
                .collect::<Result<_, Invalid>>()?,
        ),
        _ => {
            return Err(invalid(
                field,
                "exactly one of text_format and json_format must be set",
            ));
        }
    };
    Ok(AccessLog::new(
        LogTarget::Tcp(t.address),
        format,
        t.omit_empty_values,
    ))
}
