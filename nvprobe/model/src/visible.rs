//! The host's GPUs, and what a CUDA_VISIBLE_DEVICES value selects among
//! them, read as CUDA reads it (`attribution` re-exports it).

use serde::{Deserialize, Serialize};

/// A GPU the driver lists (/proc/driver/nvidia/gpus/*/information).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostGpu {
    pub minor: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// PCI bus id (0000:00:06.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// What a CUDA_VISIBLE_DEVICES value selects among the host's GPUs, in
/// CUDA's order (PCI bus order, which is also CUDA's default order for
/// identical GPUs). Err says why it selects nothing.
pub fn resolve_visible(value: &str, gpus: &[HostGpu]) -> Result<Vec<u32>, String> {
    // (A GPU named twice is [`visible_repeat`]'s: CUDA refuses the list,
    // which a verdict says where cuInit's 101 shows it.)
    let mut out: Vec<u32> = Vec::new();
    for m in visible_items(value, gpus)
        .into_iter()
        .filter_map(|(_, m)| m)
    {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        let n = gpus.len();
        Err(if value.trim().is_empty() {
            "CUDA_VISIBLE_DEVICES is set but empty: it hides every GPU".to_owned()
        } else {
            format!(
                "CUDA_VISIBLE_DEVICES={value} matches none of this host's {n} GPU{}{}",
                if n == 1 { "" } else { "s" },
                prefix_case(value, gpus)
            )
        })
    } else {
        Ok(out)
    }
}

/// Where the first item of a list names one of this host's GPUs but for
/// its prefix's case ("gpu-…"): CUDA takes only "GPU-" and "MIG-".
fn prefix_case(value: &str, gpus: &[HostGpu]) -> String {
    let first = value.split(',').map(str::trim).next().unwrap_or("");
    let Some((prefix, rest)) = first.split_at_checked(4) else {
        return String::new();
    };
    let upper = prefix.to_ascii_uppercase();
    if prefix == upper || !(upper == "GPU-" || upper == "MIG-") || rest.is_empty() {
        return String::new();
    }
    let fixed = format!("{upper}{rest}");
    match visible_items(&fixed, gpus).first() {
        Some((_, Some(minor))) => format!(
            ": {first} would be /dev/nvidia{minor} but for its prefix, which CUDA takes only as {upper:?}"
        ),
        _ => String::new(),
    }
}

/// The items of a CUDA_VISIBLE_DEVICES value CUDA reads (it stops at the
/// first invalid one), each with the GPU's minor when this host's GPUs
/// say which (None: an index or UUID of a GPU not known here).
fn visible_items<'a>(value: &'a str, gpus: &[HostGpu]) -> Vec<(&'a str, Option<u32>)> {
    let mut sorted: Vec<&HostGpu> = gpus.iter().collect();
    sorted.sort_by(|a, b| a.pci.cmp(&b.pci).then(a.minor.cmp(&b.minor)));
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim) {
        if item.is_empty() {
            break;
        }
        let found = if let Ok(i) = item.parse::<i64>() {
            // CUDA stops at the first invalid index.
            usize::try_from(i).ok().and_then(|i| sorted.get(i)).copied()
        } else if (item.starts_with("GPU-") || item.starts_with("MIG-")) && item.len() > 4 {
            // (A bare "GPU-" names no GPU: cuInit 100 on the H100 host,
            // whose one GPU's UUID it begins.)
            let mut matching = sorted.iter().copied().filter(|g| {
                g.uuid.as_deref().is_some_and(|u| {
                    u.eq_ignore_ascii_case(item)
                        || u.to_ascii_lowercase()
                            .starts_with(&item.to_ascii_lowercase())
                })
            });
            // A prefix of two GPUs' UUIDs names neither for sure.
            match (matching.next(), matching.next()) {
                (Some(g), None) => Some(g),
                _ => None,
            }
        } else {
            None
        };
        match found {
            Some(g) => out.push((item, Some(g.minor))),
            // An index is an index whatever the host (none known here).
            None if gpus.is_empty() && item.parse::<u32>().is_ok() => out.push((item, None)),
            None => break,
        }
    }
    out
}

/// A CUDA_VISIBLE_DEVICES value that names one GPU twice in the same form
/// (two indices, or two UUIDs), which CUDA refuses: cuInit returns
/// CUDA_ERROR_INVALID_DEVICE (101; "0,0" on the H100 host, 580.159.04).
/// An index and the same GPU's UUID are not refused ("0,GPU-…": cuInit 0
/// and a context on that host). The text says which.
pub fn visible_repeat(value: &str, gpus: &[HostGpu]) -> Option<String> {
    let items = visible_items(value, gpus);
    let index = |s: &str| s.parse::<u32>().ok();
    items.iter().enumerate().find_map(|(i, (item, minor))| {
        let (first, _) = items[..i].iter().find(|(other, m)| {
            // The same form only.
            if index(other).is_some() != index(item).is_some() {
                return false;
            }
            match (m, minor) {
                (Some(a), Some(b)) => a == b,
                // The host's GPUs unknown: the same index twice ("2", "02").
                _ => index(other).is_some_and(|a| index(item) == Some(a)),
            }
        })?;
        let which = minor.map_or_else(|| format!("device {item}"), |m| format!("/dev/nvidia{m}"));
        Some(if first == item {
            format!("CUDA_VISIBLE_DEVICES={value} names {which} twice ({item})")
        } else {
            format!("CUDA_VISIBLE_DEVICES={value} names {which} twice ({first} and {item})")
        })
    })
}
