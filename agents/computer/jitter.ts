// Behavioural jitter of the spec: a curved (cubic Bezier) pointer path before a click,
// and settle delays uniform in [-0.3, +0.6] s around a base, floored at half the base.
export function jitterPath(from: [number, number], to: [number, number], steps = 12, rnd: () => number = Math.random): [number, number][] {
  const [x0, y0] = from;
  const [x3, y3] = to;
  const dx = x3 - x0;
  const dy = y3 - y0;
  const len = Math.hypot(dx, dy);
  if (len < 4) return [];
  // Control points off the straight line, on a random side, scaled by the distance.
  const bend = (rnd() - 0.5) * 0.6 * len;
  const nx = -dy / len;
  const ny = dx / len;
  const c1: [number, number] = [x0 + dx * 0.3 + nx * bend, y0 + dy * 0.3 + ny * bend];
  const c2: [number, number] = [x0 + dx * 0.7 + nx * bend * 0.5, y0 + dy * 0.7 + ny * bend * 0.5];
  const out: [number, number][] = [];
  for (let i = 1; i < steps; i++) {
    const t = i / steps;
    const u = 1 - t;
    const px = u * u * u * x0 + 3 * u * u * t * c1[0] + 3 * u * t * t * c2[0] + t * t * t * x3;
    const py = u * u * u * y0 + 3 * u * u * t * c1[1] + 3 * u * t * t * c2[1] + t * t * t * y3;
    out.push([Math.max(0, Math.round(px)), Math.max(0, Math.round(py))]);
  }
  return out;
}

export function settleDelayMs(baseMs: number, rnd: () => number = Math.random): number {
  const jittered = baseMs + (-300 + rnd() * 900);
  return Math.max(baseMs / 2, jittered);
}
