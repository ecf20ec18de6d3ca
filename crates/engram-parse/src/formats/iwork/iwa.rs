//! IWA files, the object archives of iWork 2013 and later: Snappy chunks (a zero type byte, a
//! 24-bit little-endian length, raw Snappy data without CRC) whose concatenation is a stream of
//! objects, each a varint length, a `TSP.ArchiveInfo` {1: identifier, 2: MessageInfo {1: type,
//! 3: length}…} and the payloads those lengths give. `Objects` maps identifiers to (type,
//! payload) across all the document's IWA files.
//!
//! Bounds: Snappy states each chunk's decompressed length up front, checked against the
//! document's remaining budget before anything is allocated; every length is checked against the
//! bytes that are there; the object count is capped.

use std::collections::HashMap;
use std::ops::Range;

use super::proto::{varint, Message};
use crate::ParseError;

/// Most objects one document may hold.
const MAX_OBJECTS: usize = 1_000_000;

/// Decompressed bytes still allowed for a document.
pub(crate) struct Budget {
    left: usize,
    limit: usize,
}

impl Budget {
    #[cfg(test)]
    pub(crate) fn new(limit: usize) -> Self {
        Self { left: limit, limit }
    }

    /// A budget of which only `left` is still there.
    pub(crate) fn within(left: usize, limit: usize) -> Self {
        Self {
            left: left.min(limit),
            limit,
        }
    }

    fn take(&mut self, bytes: usize) -> Result<(), ParseError> {
        self.left = self.left.checked_sub(bytes).ok_or(ParseError::TooLarge {
            what: "decompressed iWork archive bytes",
            limit: self.limit,
        })?;
        Ok(())
    }
}

fn corrupt(name: &str, what: &str) -> ParseError {
    ParseError::Corrupt(format!("{name}: {what}"))
}

/// The decompressed stream of one IWA file.
pub(crate) fn decompress(
    name: &str,
    mut data: &[u8],
    budget: &mut Budget,
) -> Result<Vec<u8>, ParseError> {
    let mut out = Vec::new();
    let mut decoder = snap::raw::Decoder::new();
    while !data.is_empty() {
        let Some((&[kind, l0, l1, l2], rest)) = data.split_first_chunk::<4>() else {
            return Err(corrupt(name, "truncated chunk header"));
        };
        if kind != 0 {
            return Err(corrupt(name, "not a Snappy chunk"));
        }
        let len = usize::from(l0) | usize::from(l1) << 8 | usize::from(l2) << 16;
        let Some(chunk) = rest.get(..len) else {
            return Err(corrupt(name, "truncated chunk"));
        };
        data = &rest[len..];
        let size = snap::raw::decompress_len(chunk)
            .map_err(|e| corrupt(name, &format!("bad Snappy chunk: {e}")))?;
        budget.take(size)?;
        let start = out.len();
        out.resize(start + size, 0);
        let written = decoder
            .decompress(chunk, &mut out[start..])
            .map_err(|e| corrupt(name, &format!("bad Snappy chunk: {e}")))?;
        if written != size {
            return Err(corrupt(name, "Snappy chunk shorter than it says"));
        }
    }
    Ok(out)
}

/// Where one object's payload lies.
struct Entry {
    kind: u32,
    file: usize,
    range: Range<usize>,
}

/// The objects of a document, by identifier.
#[derive(Default)]
pub(crate) struct Objects {
    files: Vec<Vec<u8>>,
    table: HashMap<u64, Entry>,
}

impl Objects {
    /// Adds the objects of one IWA file (`name` for messages).
    pub(crate) fn add_file(
        &mut self,
        name: &str,
        compressed: &[u8],
        budget: &mut Budget,
    ) -> Result<(), ParseError> {
        let data = decompress(name, compressed, budget)?;
        let file = self.files.len();
        // Entries are added only once the whole file has been read.
        let mut entries = Vec::new();
        let mut pos = 0usize;
        while pos < data.len() {
            let (len, used) =
                varint(&data[pos..]).ok_or_else(|| corrupt(name, "bad archive header length"))?;
            pos += used;
            let info = usize::try_from(len)
                .ok()
                .and_then(|len| data.get(pos..pos.checked_add(len)?))
                .ok_or_else(|| corrupt(name, "truncated archive header"))?;
            pos += info.len();
            let info = Message(info);
            let id = info
                .uint(1)
                .ok_or_else(|| corrupt(name, "archive without an identifier"))?;
            let mut first = None;
            for message in info.messages(2) {
                let length = message
                    .uint(3)
                    .and_then(|l| usize::try_from(l).ok())
                    .filter(|&l| l <= data.len() - pos)
                    .ok_or_else(|| corrupt(name, "message longer than its archive"))?;
                if first.is_none() {
                    first = Some((message.uint32(1).unwrap_or(0), pos..pos + length));
                }
                pos += length;
            }
            if let Some((kind, range)) = first {
                if self.table.len() + entries.len() >= MAX_OBJECTS {
                    return Err(ParseError::TooLarge {
                        what: "iWork objects",
                        limit: MAX_OBJECTS,
                    });
                }
                entries.push((id, Entry { kind, file, range }));
            }
        }
        for (id, entry) in entries {
            self.table.entry(id).or_insert(entry);
        }
        self.files.push(data);
        Ok(())
    }

    /// The type and payload of object `id`.
    pub(crate) fn get(&self, id: u64) -> Option<(u32, Message<'_>)> {
        let entry = self.table.get(&id)?;
        let bytes = self.files.get(entry.file)?.get(entry.range.clone())?;
        Some((entry.kind, Message(bytes)))
    }

    /// The payload of object `id` if its type is one of `kinds`.
    pub(crate) fn typed(&self, id: u64, kinds: &[u32]) -> Option<Message<'_>> {
        self.get(id)
            .filter(|(kind, _)| kinds.contains(kind))
            .map(|(_, message)| message)
    }

    /// The identifiers of every object of one of `kinds`, in increasing order.
    pub(crate) fn ids_of(&self, kinds: &[u32]) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .table
            .iter()
            .filter(|(_, e)| kinds.contains(&e.kind))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::proto::tests::{put_bytes, put_uint, put_varint};
    use super::*;

    /// `data` as IWA chunks made by snap's own compressor, `chunk` bytes of input each.
    pub(crate) fn iwa(data: &[u8], chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = snap::raw::Encoder::new();
        for part in data.chunks(chunk.max(1)) {
            let compressed = encoder.compress_vec(part).unwrap();
            let len = u32::try_from(compressed.len()).unwrap().to_le_bytes();
            out.push(0);
            out.extend_from_slice(&len[..3]);
            out.extend_from_slice(&compressed);
        }
        out
    }

    /// One object: header and payload.
    pub(crate) fn object(id: u64, kind: u32, payload: &[u8]) -> Vec<u8> {
        let mut info = Vec::new();
        put_uint(&mut info, 1, id);
        let mut message_info = Vec::new();
        put_uint(&mut message_info, 1, u64::from(kind));
        put_uint(&mut message_info, 3, payload.len() as u64);
        put_bytes(&mut info, 2, &message_info);
        let mut out = Vec::new();
        put_varint(&mut out, info.len() as u64);
        out.extend_from_slice(&info);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn objects_across_chunks() {
        let mut stream = object(1, 10000, b"\x08\x01");
        stream.extend(object(7, 2001, &[b'x'; 300]));
        let file = iwa(&stream, 100);
        let mut objects = Objects::default();
        objects
            .add_file("Document.iwa", &file, &mut Budget::new(1 << 20))
            .unwrap();
        assert_eq!(objects.get(1).unwrap().0, 10000);
        assert_eq!(objects.typed(7, &[2001]).unwrap().0, &[b'x'; 300][..]);
        assert!(objects.typed(7, &[2005]).is_none());
        assert_eq!(objects.ids_of(&[2001, 10000]), [1, 7]);
    }

    #[test]
    fn chunk_bounds() {
        let stream = object(1, 1, &[b'a'; 5000]);
        let file = iwa(&stream, 1 << 16);
        let budget = || Budget::new(1 << 20);
        // A truncated chunk.
        let cut = &file[..file.len() - 3];
        assert!(matches!(
            decompress("x.iwa", cut, &mut budget()),
            Err(ParseError::Corrupt(m)) if m.contains("truncated chunk")
        ));
        assert!(matches!(
            decompress("x.iwa", &file[..2], &mut budget()),
            Err(ParseError::Corrupt(_))
        ));
        // A header whose length lies (longer than the data).
        let mut lying = file.clone();
        lying[1] = lying[1].wrapping_add(10);
        assert!(decompress("x.iwa", &lying, &mut budget()).is_err());
        // A decompressed length over the budget fails before allocating.
        assert_eq!(
            decompress("x.iwa", &file, &mut Budget::new(4000)),
            Err(ParseError::TooLarge {
                what: "decompressed iWork archive bytes",
                limit: 4000
            })
        );
        // Snappy data that states a length far beyond what it holds.
        let mut huge = vec![0u8, 0, 0, 0];
        let mut body = Vec::new();
        put_varint(&mut body, 1 << 26);
        body.extend_from_slice(&file[4 + 2..]);
        huge[1] = u8::try_from(body.len() & 0xFF).unwrap();
        huge[2] = u8::try_from(body.len() >> 8).unwrap();
        huge.extend_from_slice(&body);
        assert!(matches!(
            decompress("x.iwa", &huge, &mut budget()),
            Err(ParseError::TooLarge { .. })
        ));
        // Not a Snappy chunk at all.
        let mut typed = file.clone();
        typed[0] = 1;
        assert!(decompress("x.iwa", &typed, &mut budget()).is_err());
        assert_eq!(decompress("x.iwa", &file, &mut budget()).unwrap(), stream);
    }

    #[test]
    fn archive_bounds() {
        let mut stream = object(1, 1, b"abc");
        // A message info whose length runs past the end of the stream.
        let last = stream.len() - 1;
        stream.truncate(last);
        let mut objects = Objects::default();
        assert!(matches!(
            objects.add_file("x.iwa", &iwa(&stream, 1 << 16), &mut Budget::new(1 << 20)),
            Err(ParseError::Corrupt(m)) if m.contains("longer than its archive")
        ));
        // Garbage that decompresses fine is not an archive.
        let mut objects = Objects::default();
        assert!(objects
            .add_file(
                "x.iwa",
                &iwa(&[0xFF; 40], 1 << 16),
                &mut Budget::new(1 << 20)
            )
            .is_err());
    }
}
