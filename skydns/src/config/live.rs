//! Following the etcd config key, so that a change applies without a restart:
//! [`follow`] merges each new value over the flags and hands the result to the
//! handler. What a running process cannot change keeps its value and is logged;
//! a value that does not validate changes nothing.

use super::{nameservers_from_resolv_conf, Config, ConfigError, Flags, Settings};
use crate::handler::Handler;
use std::collections::HashSet;
use std::path::Path;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The configuration in force and how it came about.
pub(crate) struct Follower {
    flags: Flags,
    key: String,
    /// The merged settings in force.
    running: Settings,
    /// The value of the key they came from.
    applied: Option<Vec<u8>>,
    /// Restart-only settings already logged, with their values.
    warned: HashSet<(&'static str, String)>,
}

impl Follower {
    /// The follower of `key`, which held `applied` when the server started
    /// with `running`.
    pub(crate) fn new(
        flags: Flags,
        key: String,
        running: Settings,
        applied: Option<Vec<u8>>,
    ) -> Self {
        Follower {
            flags,
            key,
            running,
            applied,
            warned: HashSet::new(),
        }
    }

    /// Applies `value` of the key to `handler`, unless it is the value in
    /// force or it is invalid (then logged and counted).
    pub(crate) fn apply(&mut self, value: Option<Vec<u8>>, handler: &Handler) {
        if value == self.applied {
            return;
        }
        match self.config_for(value.as_deref()) {
            Ok((settings, config)) => {
                let mut features = config.handler;
                // The key pair is loaded once, at start.
                features.dnssec = handler.settings().dnssec;
                let nameservers = features.forward.nameservers.clone();
                handler.reconfigure(config.zone, features);
                handler.metrics().config_reload("applied");
                tracing::info!(
                    key = %self.key,
                    ?nameservers,
                    present = value.is_some(),
                    "applied the etcd config key (the flags where it is silent)"
                );
                self.running = settings;
            }
            Err(error) => {
                handler.metrics().config_reload("invalid");
                tracing::warn!(key = %self.key, %error, "ignoring the new value of the etcd config key; the running configuration stays");
            }
        }
        self.applied = value;
    }

    /// The settings and configuration `value` gives over the flags.
    fn config_for(&mut self, value: Option<&[u8]>) -> Result<(Settings, Config), ConfigError> {
        let mut settings = Settings::from_flags(&self.flags);
        if let Some(json) = value {
            settings.merge_json(json)?;
        }
        self.keep_restart_only(&mut settings);
        let mut finishing = settings.clone();
        finishing.dnssec.dnssec = String::new();
        let config = finishing.finish(&self.flags, || {
            nameservers_from_resolv_conf(Path::new("/etc/resolv.conf"))
        })?;
        Ok((settings, config))
    }

    /// Puts back the running value of every setting that needs a restart,
    /// logging each new value once.
    fn keep_restart_only(&mut self, s: &mut Settings) {
        let running = &self.running;
        let mut changed: Vec<(&'static str, String)> = Vec::new();
        if s.dns_addr != running.dns_addr {
            changed.push((
                "dns_addr",
                std::mem::replace(&mut s.dns_addr, running.dns_addr.clone()),
            ));
        }
        if s.domain != running.domain {
            changed.push((
                "domain",
                std::mem::replace(&mut s.domain, running.domain.clone()),
            ));
        }
        if s.dnssec.dnssec != running.dnssec.dnssec {
            changed.push((
                "dnssec",
                std::mem::replace(&mut s.dnssec.dnssec, running.dnssec.dnssec.clone()),
            ));
        }
        if s.dnssec.scache != running.dnssec.scache {
            changed.push((
                "scache",
                std::mem::replace(&mut s.dnssec.scache, running.dnssec.scache).to_string(),
            ));
        }
        if s.systemd != running.systemd {
            changed.push((
                "systemd",
                std::mem::replace(&mut s.systemd, running.systemd).to_string(),
            ));
        }
        if s.lifecycle.lameduck != running.lifecycle.lameduck {
            changed.push((
                "lameduck",
                std::mem::replace(&mut s.lifecycle.lameduck, running.lifecycle.lameduck)
                    .to_string(),
            ));
        }
        for (setting, value) in changed {
            if self.warned.insert((setting, value.clone())) {
                tracing::warn!(key = %self.key, setting, %value, "this setting of the etcd config key takes effect only after a restart");
            }
        }
    }
}

/// Applies every new value of the config key to `handler` until `stop`.
pub(crate) async fn follow(
    mut follower: Follower,
    mut values: watch::Receiver<Option<Vec<u8>>>,
    handler: Handler,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = values.changed() => if changed.is_err() { return },
        }
        let value = values.borrow_and_update().clone();
        follower.apply(value, &handler);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::tests::handler_with;
    use crate::handler::Settings as HandlerSettings;

    fn follower(args: &[&str]) -> Follower {
        let mut argv = vec!["skydns", "-nameservers=127.0.0.1:5301"];
        argv.extend_from_slice(args);
        let flags = crate::config::parse_args(go_args(&argv)).unwrap();
        let running = Settings::from_flags(&flags);
        Follower::new(flags, "/skydns/config".into(), running, None)
    }

    fn go_args(argv: &[&str]) -> Vec<std::ffi::OsString> {
        crate::config::go_style_args(argv.iter().map(std::ffi::OsString::from))
    }

    fn nameservers(h: &Handler) -> Vec<String> {
        h.settings()
            .forward
            .nameservers
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_new_value_applies_a_bad_one_changes_nothing_and_deleting_goes_back_to_the_flags() {
        let h = handler_with(None, HandlerSettings::default());
        let mut f = follower(&[]);
        f.apply(
            Some(br#"{"nameservers":["127.0.0.1:5302"],"ndot":3}"#.to_vec()),
            &h,
        );
        assert_eq!(nameservers(&h), ["127.0.0.1:5302"]);
        assert_eq!(h.settings().forward.ndots, 3);
        for bad in [
            &b"{not json"[..],
            br#"{"nameservers":["nowhere"]}"#,
            br#"["a"]"#,
        ] {
            f.apply(Some(bad.to_vec()), &h);
            assert_eq!(
                nameservers(&h),
                ["127.0.0.1:5302"],
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let text = h.metrics().render();
        assert!(
            text.contains("skydns_dns_config_reloads_total{result=\"invalid\"} 3"),
            "{text}"
        );
        f.apply(None, &h);
        assert_eq!(nameservers(&h), ["127.0.0.1:5301"], "the flag's");
        assert_eq!(h.settings().forward.ndots, 2);
    }

    #[test]
    fn settings_that_need_a_restart_keep_their_running_value() {
        let h = handler_with(None, HandlerSettings::default());
        let mut f = follower(&["-domain=cluster.local."]);
        f.apply(
            Some(br#"{"domain":"other.example.","dns_addr":"127.0.0.1:9","rcache":50}"#.to_vec()),
            &h,
        );
        assert_eq!(h.settings().cache.capacity, 50, "a live setting applied");
        assert_eq!(f.running.domain, "cluster.local.");
        assert_eq!(f.running.dns_addr, "127.0.0.1:53");
        assert_eq!(f.warned.len(), 2, "each logged once: {:?}", f.warned);
        f.apply(
            Some(br#"{"domain":"other.example.","rcache":60}"#.to_vec()),
            &h,
        );
        assert_eq!(f.warned.len(), 2, "not logged again");
    }
}
