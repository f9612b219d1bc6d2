// The pinned-source pattern of the spec: an exact origin, or a glob over the whole URL
// (`*` matches any run of characters).
export function matchesPin(url: string, pattern: string): boolean {
  if (!pattern) return true;
  if (!pattern.includes('*')) {
    try {
      return new URL(url).origin === new URL(pattern).origin;
    } catch {
      return false;
    }
  }
  const re = new RegExp(`^${pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\/]/g, '\\$&')).join('.*')}$`);
  return re.test(url);
}
