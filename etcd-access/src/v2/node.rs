//! The JSON the v2 keys API answers with: a [`Response`] holding a [`Node`]
//! tree, and the helpers that flatten a tree into leaves and directories.

use serde::Deserialize;

/// One answer of `/v2/keys`: the action, the node it is about and, for
/// changes, the node before. `index` is the `X-Etcd-Index` header: etcd's
/// index when the request was served (for a watch: when it was registered).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Response {
    /// `get`, `set`, `create`, `update`, `delete`, `expire`,
    /// `compareAndSwap` or `compareAndDelete`.
    pub action: String,
    /// The node read or changed.
    pub node: Node,
    /// The node before a change, when there was one.
    #[serde(default, rename = "prevNode")]
    pub prev_node: Option<Node>,
    /// `X-Etcd-Index` (not part of the body; filled in by the client).
    #[serde(skip)]
    pub index: u64,
}

impl Response {
    /// Whether the action removed the node (`delete`, `expire`,
    /// `compareAndDelete`).
    pub fn is_removal(&self) -> bool {
        matches!(
            self.action.as_str(),
            "delete" | "expire" | "compareAndDelete"
        )
    }
}

/// A key or a directory.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Node {
    /// The full key, e.g. `/skydns/local/cluster/svc/default/kubernetes/c88f1059`
    /// (absent only for the root directory).
    #[serde(default)]
    pub key: String,
    /// Whether this node is a directory.
    #[serde(default)]
    pub dir: bool,
    /// A key's value (directories have none).
    #[serde(default)]
    pub value: Option<String>,
    /// A directory's children, when read recursively (hidden `_` children
    /// are never listed by etcd).
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Seconds left before the node expires, when it has a TTL.
    #[serde(default)]
    pub ttl: Option<i64>,
    /// Index of the last change of this node.
    #[serde(default, rename = "modifiedIndex")]
    pub modified_index: u64,
    /// Index of the node's creation.
    #[serde(default, rename = "createdIndex")]
    pub created_index: u64,
}

/// A key with its value, as found in a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The full key.
    pub key: String,
    /// The value.
    pub value: String,
    /// Seconds left, when the key has a TTL.
    pub ttl: Option<u32>,
}

impl Node {
    /// Every key in this tree (the node itself when it is a key), depth first.
    pub fn leaves(&self) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.walk(&mut |n| {
            if !n.dir {
                out.push(Leaf {
                    key: n.key.clone(),
                    value: n.value.clone().unwrap_or_default(),
                    ttl: n.ttl.map(|t| u32::try_from(t.max(0)).unwrap_or(u32::MAX)),
                });
            }
        });
        out
    }

    /// Every directory in this tree, the node itself included when it is one.
    pub fn dirs(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(&mut |n| {
            if n.dir {
                out.push(n.key.clone());
            }
        });
        out
    }

    fn walk<'a>(&'a self, visit: &mut impl FnMut(&'a Node)) {
        visit(self);
        for child in &self.nodes {
            child.walk(visit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TREE: &str = r#"{"action":"get","node":{"key":"/skydns","dir":true,"nodes":[
        {"key":"/skydns/local","dir":true,"nodes":[
            {"key":"/skydns/local/a","value":"{\"host\":\"10.0.0.1\"}","modifiedIndex":7,"createdIndex":7},
            {"key":"/skydns/local/empty","dir":true,"modifiedIndex":8,"createdIndex":8},
            {"key":"/skydns/local/t","value":"x","ttl":29,"expiration":"2026-11-23T10:00:00Z","modifiedIndex":9,"createdIndex":9}
        ],"modifiedIndex":4,"createdIndex":4}],"modifiedIndex":4,"createdIndex":4}}"#;

    #[test]
    fn a_tree_flattens_into_leaves_and_directories() {
        let resp: Response = serde_json::from_str(TREE).expect("parse");
        assert_eq!(resp.action, "get");
        let leaves = resp.node.leaves();
        assert_eq!(
            leaves,
            vec![
                Leaf {
                    key: "/skydns/local/a".into(),
                    value: r#"{"host":"10.0.0.1"}"#.into(),
                    ttl: None
                },
                Leaf {
                    key: "/skydns/local/t".into(),
                    value: "x".into(),
                    ttl: Some(29)
                },
            ]
        );
        assert_eq!(
            resp.node.dirs(),
            vec!["/skydns", "/skydns/local", "/skydns/local/empty"]
        );
    }

    #[test]
    fn removals_are_told_apart_from_writes() {
        let mut resp: Response = serde_json::from_str(TREE).expect("parse");
        assert!(!resp.is_removal());
        for action in ["delete", "expire", "compareAndDelete"] {
            resp.action = action.into();
            assert!(resp.is_removal(), "{action}");
        }
    }
}
