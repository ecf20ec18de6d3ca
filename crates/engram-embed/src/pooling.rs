//! Sentence vectors from token vectors: mean pooling over the attention mask, L2 normalisation.

/// Mean of the token vectors of one sequence whose mask is 1 (padding is left out).
///
/// `hidden` holds `mask.len()` rows of `dimension` values. A sequence with no unmasked token
/// gives the zero vector.
pub(crate) fn mean_pool(hidden: &[f32], mask: &[u32], dimension: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; dimension];
    let mut count = 0u32;
    for (row, &m) in hidden.chunks_exact(dimension).zip(mask) {
        if m != 0 {
            count += 1;
            for (s, v) in sum.iter_mut().zip(row) {
                *s += v;
            }
        }
    }
    if count > 0 {
        let n = count as f32;
        for s in &mut sum {
            *s /= n;
        }
    }
    sum
}

/// Scales `v` to unit Euclidean length; the zero vector stays zero.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// Cosine similarity of two vectors of the same length (the dot product, for unit vectors).
/// Zero when either is the zero vector.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_ignores_padding() {
        // Two real tokens and one padding row that would change the mean if counted.
        let hidden = [1.0, 2.0, 3.0, 4.0, 100.0, 100.0];
        assert_eq!(mean_pool(&hidden, &[1, 1, 0], 2), vec![2.0, 3.0]);
    }

    #[test]
    fn mean_pool_of_nothing_is_zero() {
        assert_eq!(mean_pool(&[5.0, 5.0], &[0], 2), vec![0.0, 0.0]);
    }

    #[test]
    fn normalize_gives_unit_length() {
        let mut v = [3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut zero = [0.0, 0.0];
        l2_normalize(&mut zero);
        assert_eq!(zero, [0.0, 0.0]);
    }

    #[test]
    fn cosine_of_parallel_orthogonal_and_zero() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }
}
