//! A small reader of the protobuf wire format, enough for the few iWork archives engram reads:
//! fields are looked up by number in a borrowed message, never copied. Reading is lenient, as
//! generated code is: a field of an unexpected wire type is skipped, and malformed bytes end the
//! message (what was read before them stands). Nothing here allocates or recurses.

/// One field's value, as the wire types carry it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// A message's bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Message<'a>(pub(crate) &'a [u8]);

/// Reads a varint at the start of `bytes`: the value and the bytes it took.
pub(crate) fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The fields of a message in order, as (number, value).
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Fields<'a> {
    type Item = (u32, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let field = self.read();
        if field.is_none() {
            self.rest = &[];
        }
        field
    }
}

impl<'a> Fields<'a> {
    fn read(&mut self) -> Option<(u32, Value<'a>)> {
        let (key, used) = varint(self.rest)?;
        let rest = &self.rest[used..];
        let number = u32::try_from(key >> 3).ok().filter(|&n| n > 0)?;
        let (value, rest) = match key & 7 {
            0 => {
                let (v, used) = varint(rest)?;
                (Value::Varint(v), &rest[used..])
            }
            1 => {
                let (bytes, rest) = rest.split_first_chunk::<8>()?;
                (Value::Fixed64(u64::from_le_bytes(*bytes)), rest)
            }
            2 => {
                let (len, used) = varint(rest)?;
                let rest = &rest[used..];
                let len = usize::try_from(len).ok().filter(|&l| l <= rest.len())?;
                let (bytes, rest) = rest.split_at(len);
                (Value::Bytes(bytes), rest)
            }
            5 => {
                let (bytes, rest) = rest.split_first_chunk::<4>()?;
                (Value::Fixed32(u32::from_le_bytes(*bytes)), rest)
            }
            // Groups (3, 4) are not used by iWork; anything else is not protobuf.
            _ => return None,
        };
        self.rest = rest;
        Some((number, value))
    }
}

impl<'a> Message<'a> {
    pub(crate) fn fields(self) -> Fields<'a> {
        Fields { rest: self.0 }
    }

    /// Every value of field `number`, in order.
    pub(crate) fn all(self, number: u32) -> impl Iterator<Item = Value<'a>> {
        self.fields()
            .filter(move |(n, _)| *n == number)
            .map(|(_, v)| v)
    }

    /// The last value of field `number` (protobuf's rule for a repeated scalar field).
    fn last(self, number: u32) -> Option<Value<'a>> {
        self.all(number).last()
    }

    pub(crate) fn uint(self, number: u32) -> Option<u64> {
        match self.last(number)? {
            Value::Varint(v) | Value::Fixed64(v) => Some(v),
            Value::Fixed32(v) => Some(u64::from(v)),
            Value::Bytes(_) => None,
        }
    }

    pub(crate) fn uint32(self, number: u32) -> Option<u32> {
        self.uint(number).and_then(|v| u32::try_from(v).ok())
    }

    pub(crate) fn bool(self, number: u32) -> Option<bool> {
        self.uint(number).map(|v| v != 0)
    }

    pub(crate) fn bytes(self, number: u32) -> Option<&'a [u8]> {
        match self.last(number)? {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// A string field (invalid UTF-8 is replaced).
    pub(crate) fn string(self, number: u32) -> Option<String> {
        self.bytes(number)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Every value of a repeated string field.
    pub(crate) fn strings(self, number: u32) -> impl Iterator<Item = String> + 'a {
        self.all(number).filter_map(|v| match v {
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
    }

    /// An embedded message (the last one: protobuf merges them, the parts iWork reads are
    /// written once).
    pub(crate) fn message(self, number: u32) -> Option<Message<'a>> {
        self.bytes(number).map(Message)
    }

    pub(crate) fn messages(self, number: u32) -> impl Iterator<Item = Message<'a>> {
        self.all(number).filter_map(|v| match v {
            Value::Bytes(b) => Some(Message(b)),
            _ => None,
        })
    }

    /// A `TSP.Reference` field: the identifier of the object it points to.
    pub(crate) fn reference(self, number: u32) -> Option<u64> {
        self.message(number)?.uint(1)
    }

    /// Every `TSP.Reference` of a repeated field.
    pub(crate) fn references(self, number: u32) -> impl Iterator<Item = u64> + 'a {
        self.messages(number).filter_map(|m| m.uint(1))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes a varint (for building test messages).
    pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    /// Encodes a length-delimited field.
    pub(crate) fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
        put_varint(out, u64::from(number) << 3 | 2);
        put_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    /// Encodes a varint field.
    pub(crate) fn put_uint(out: &mut Vec<u8>, number: u32, value: u64) {
        put_varint(out, u64::from(number) << 3);
        put_varint(out, value);
    }

    #[test]
    fn fields_by_number_and_malformed_tails() {
        let mut reference = Vec::new();
        put_uint(&mut reference, 1, 300);
        let mut message = Vec::new();
        put_uint(&mut message, 1, 7);
        put_bytes(&mut message, 3, b"one");
        put_bytes(&mut message, 3, b"two");
        put_bytes(&mut message, 4, &reference);
        put_varint(&mut message, 5 << 3 | 5); // a fixed32 (a float) is skipped over
        message.extend_from_slice(&1.5f32.to_le_bytes());
        put_uint(&mut message, 6, 150);
        let m = Message(&message);
        assert_eq!(m.uint(1), Some(7));
        assert_eq!(m.strings(3).collect::<Vec<_>>(), ["one", "two"]);
        assert_eq!(m.string(3).as_deref(), Some("two"));
        assert_eq!(m.reference(4), Some(300));
        assert_eq!(m.uint(5), Some(u64::from(1.5f32.to_bits())));
        assert_eq!(m.uint32(6), Some(150));
        assert_eq!(m.uint(2), None);
        // A length past the end stops reading there; what came before stands.
        let mut broken = message.clone();
        put_varint(&mut broken, 7 << 3 | 2);
        put_varint(&mut broken, 127);
        broken.push(b'x');
        assert_eq!(Message(&broken).fields().count(), 6);
        assert_eq!(varint(&[0xFF; 11]), None);
    }
}
