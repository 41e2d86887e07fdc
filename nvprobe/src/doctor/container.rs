//! Container context: which runtime (LXC, docker, podman, Kubernetes), the
//! device cgroup's rules for the NVIDIA majors, and what the host side must
//! provide.

use std::path::Path;

use super::check::{Check, Verdict, check};
use crate::{host::Majors, safefs};

fn read_text(root: &Path, rel: &str) -> String {
    safefs::read_text(root, rel, safefs::CAP).unwrap_or_default()
}

/// The runtime and the file that says so.
pub fn detect(root: &Path) -> Option<(&'static str, String)> {
    let environ = safefs::read_noted(root, "proc/1/environ", safefs::CAP).unwrap_or_default();
    let env: Vec<String> = environ
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    let cgroup = read_text(root, "proc/1/cgroup") + &read_text(root, "proc/self/cgroup");
    if env
        .iter()
        .any(|e| e.starts_with("KUBERNETES_SERVICE_HOST="))
        || cgroup.contains("kubepods")
    {
        return Some((
            "kubernetes",
            "KUBERNETES_SERVICE_HOST or a kubepods cgroup".into(),
        ));
    }
    if let Some(c) = env.iter().find_map(|e| e.strip_prefix("container=")) {
        let kind = match c {
            "lxc" | "lxc-libvirt" => "lxc",
            "podman" => "podman",
            "docker" => "docker",
            "systemd-nspawn" => "systemd-nspawn",
            _ => "container",
        };
        return Some((kind, format!("container={c} in pid 1's environment")));
    }
    if safefs::exists(root, "run/.containerenv") {
        return Some(("podman", "/run/.containerenv".into()));
    }
    if safefs::exists(root, ".dockerenv") {
        return Some(("docker", "/.dockerenv".into()));
    }
    if safefs::exists(root, "dev/.lxc-boot-id") || cgroup.contains("/lxc") {
        return Some(("lxc", "/dev/.lxc-boot-id or an lxc cgroup".into()));
    }
    if cgroup.contains("docker") || cgroup.contains("libpod") {
        return Some(("docker", "a docker/libpod cgroup".into()));
    }
    None
}

/// A v1 `devices.list` rule: "c 195:* rwm", "a *:* rwm".
#[derive(Debug, PartialEq, Eq)]
struct Rule {
    kind: char,
    major: Option<u32>,
    minor: Option<u32>,
    access: String,
}

fn parse_rules(text: &str) -> Vec<Rule> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [k, mm, acc] = f[..] else { return None };
            let (ma, mi) = mm.split_once(':')?;
            let num = |s: &str| {
                if s == "*" {
                    Ok(None)
                } else {
                    s.parse().map(Some)
                }
            };
            Some(Rule {
                kind: k.chars().next()?,
                major: num(ma).ok()?,
                minor: num(mi).ok()?,
                access: acc.to_owned(),
            })
        })
        .collect()
}

fn allows(rules: &[Rule], major: u32, minor: u32) -> bool {
    rules.iter().any(|r| {
        (r.kind == 'a' || r.kind == 'c')
            && r.major.is_none_or(|m| m == major)
            && r.minor.is_none_or(|m| m == minor)
            && r.access.contains('r')
            && r.access.contains('w')
    })
}

/// The device cgroup v1 list of this process's cgroup, if cgroup v1's
/// devices controller is mounted.
fn devices_list(root: &Path) -> Option<(String, String)> {
    let cg = read_text(root, "proc/self/cgroup");
    let path = cg.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctrl, p) = (it.next()?, it.next()?, it.next()?);
        ctrl.split(',')
            .any(|c| c == "devices")
            .then(|| p.to_owned())
    });
    let mut candidates = Vec::new();
    if let Some(p) = &path {
        candidates.push(
            format!("sys/fs/cgroup/devices/{}/devices.list", p.trim_matches('/'))
                .replace("//", "/"),
        );
    }
    candidates.push("sys/fs/cgroup/devices/devices.list".into());
    candidates.push("sys/fs/cgroup/devices.list".into());
    candidates
        .into_iter()
        .find_map(|c| safefs::read_text(root, &c, safefs::CAP).map(|t| (format!("/{c}"), t)))
}

pub fn checks(root: &Path, m: &Majors, out: &mut Vec<Check>) {
    let runtime = detect(root);
    let host_side = |rt: &str, uvm: &str| -> String {
        match rt {
            "lxc" => format!(
                "on the host: load nvidia and nvidia_uvm there (a container cannot), then in the container's config allow the devices (lxc.cgroup2.devices.allow: c 195:* rwm and c {uvm}:* rwm) and bind them (lxc.mount.entry: /dev/nvidiactl, /dev/nvidia0…, /dev/nvidia-uvm, /dev/nvidia-uvm-tools)"
            ),
            "kubernetes" => "the NVIDIA device plugin (or GPU operator) must grant the pod a GPU (resources: limits: nvidia.com/gpu); it passes the nodes and libraries in".to_owned(),
            _ => "run it with the NVIDIA container toolkit (docker run --gpus all / --device nvidia.com/gpu=all), or pass --device for /dev/nvidiactl, /dev/nvidia0…, /dev/nvidia-uvm and /dev/nvidia-uvm-tools; the host must have nvidia and nvidia_uvm loaded".to_owned(),
        }
    };
    let uvm = m
        .uvm
        .map_or_else(|| "<uvm major>".to_owned(), |u| u.to_string());
    match &runtime {
        None => out.push(check(
            "container",
            "runtime",
            Verdict::Ok,
            "not in a container (no container=, /.dockerenv, /run/.containerenv, kubepods or lxc cgroup)",
            None,
        )),
        Some((rt, why)) => out.push(check(
            "container",
            "runtime",
            Verdict::Ok,
            format!("inside {rt} ({why})"),
            Some(&format!("what the host must provide: {}", host_side(rt, &uvm))),
        )),
    }
    let cgv2 = safefs::exists(root, "sys/fs/cgroup/cgroup.controllers");
    match devices_list(root) {
        Some((path, text)) => {
            let rules = parse_rules(&text);
            let mut missing = Vec::new();
            if let Some(nv) = m.nvidia {
                for (name, mi) in [("nvidiactl", 255), ("nvidia0", 0)] {
                    if !allows(&rules, nv, mi) {
                        missing.push(format!("/dev/{name} ({nv}:{mi})"));
                    }
                }
            }
            if let Some(u) = m.uvm {
                for (name, mi) in [("nvidia-uvm", 0), ("nvidia-uvm-tools", 1)] {
                    if !allows(&rules, u, mi) {
                        missing.push(format!("/dev/{name} ({u}:{mi})"));
                    }
                }
            }
            let summary: Vec<&str> = text.lines().take(8).collect();
            out.push(if missing.is_empty() {
                check(
                    "container",
                    "device_cgroup",
                    Verdict::Ok,
                    format!("{path} allows the NVIDIA devices: {}", summary.join(", ")),
                    None,
                )
            } else {
                check(
                    "container",
                    "device_cgroup",
                    Verdict::Fail,
                    format!("{path} does not allow {} (rules: {})", missing.join(", "), summary.join(", ")),
                    Some(&format!(
                        "opens of these nodes fail with EPERM: {}",
                        host_side(runtime.as_ref().map_or("docker", |r| r.0), &uvm)
                    )),
                )
            });
        }
        None if cgv2 => out.push(check(
            "container",
            "device_cgroup",
            Verdict::Ok,
            "cgroup v2: device access is decided by BPF programs on the cgroup, which cannot be read back as rules; the open test says what is allowed",
            None,
        )),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_rules() {
        let r = parse_rules("c 195:* rwm\nc 1:3 rwm\nb 8:* r\nc 238:0 r\n");
        assert!(allows(&r, 195, 255));
        assert!(!allows(&r, 238, 0), "read only");
        assert!(!allows(&r, 238, 1));
        assert!(allows(&parse_rules("a *:* rwm"), 238, 1));
        assert!(parse_rules("garbage\nc x:1 rw\n").is_empty());
    }
}
