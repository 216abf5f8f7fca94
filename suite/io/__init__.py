"""Infrastructure every part of the suite shares: atomic writes, provenance, plotting, progress."""
