// The browser tools: a browser session opened through the sessions service (the same
// slots, rate token, fleet placement, proxies and egress guard as POST /v1/sessions),
// driven through its plane the way the runner drives a run's: the plane's wire contract
// adapted by gateway/runner/plane-adapter.ts (dispatch and the `cdp` op on dom_plane,
// xdotool on computer_plane). An MCP session reaches only the browser sessions it opened.
import { ServiceError, badRequest, notFound, unprocessable } from '../errors.ts';
import { connectPlane, PlaneCallError, type PlaneSession } from '../planes/index.ts';
import { adaptPlane } from '../runner/plane-adapter.ts';
import { checkStepRows } from '../runner/step-rows.ts';
import { fleetOf } from '../routes/cdp.ts';
import { specOf } from '../routes/sessions.ts';
import { sessionBody, type SessionRecord } from '../sessions/records.ts';
import type { Action, Capabilities, Plane, StepContext } from '../plugins/contract.ts';
import type { McpClick, McpExtract, McpNavigate, McpPressKey, McpScroll, McpType, SessionCreateRequest, Step } from '../../schemas/types.gen.ts';
import { json, requireScope, scrub, type McpContext, type ToolArgs, type ToolOutput } from './context.ts';
import { locateScript, snapshotScript, type TargetSpec } from './page-scripts.ts';

/** Browser sessions one MCP session may hold at once (each is one of the tenant's run slots). */
export const MAX_BROWSERS_PER_MCP_SESSION = 5;
const SNAPSHOT_MAX_LINES = 3000;
const SNAPSHOT_MAX_CHARS = 120_000;
const PLANE_CALL_MS = 30_000;
const SCROLLED = (before: number): string =>
  `new Promise((resolve) => { const end = Date.now() + 500; const look = () => (Math.round(scrollY) !== ${before} || Date.now() > end ? resolve(Math.round(scrollY)) : setTimeout(look, 20)); look(); })`;

const capabilitiesOf = (r: SessionRecord): Capabilities =>
  r.compute_backend === 'dom_plane' ? { dom_aware: true, stealth: false, supports_cdp: true, backend: 'dom_plane' } : { dom_aware: false, stealth: true, supports_cdp: true, backend: 'computer_plane' };

/** A live browser session this MCP session opened, or why not. */
async function owned(c: McpContext, id: string): Promise<SessionRecord> {
  requireScope(c, 'run');
  // another MCP session's (or another tenant's) browser is indistinguishable from none
  if (!c.browsers.has(id)) throw notFound(`no browser session ${id} in this MCP session (session_open opens one)`);
  const r = await c.s.sessions.get(c.tenant(), id);
  if (r.status !== 'live') throw new ServiceError('conflict', `the browser session ended (${r.end_reason ?? 'unknown'}): open another with session_open`);
  return r;
}

/** Runs `fn` on the session's plane through a connection of its own (any replica reaches any live session). */
async function withPlane<T>(c: McpContext, r: SessionRecord, fn: (plane: Plane, session: PlaneSession) => Promise<T>): Promise<T> {
  const ep = c.s.sessions.endpointOf(r, fleetOf(c.s));
  if (!ep) throw new ServiceError('conflict', 'the browser session is not reachable (still starting, or ended)');
  const session = connectPlane({ url: ep.url, secret: ep.secret, ca: ep.ca, deadlineMs: PLANE_CALL_MS, retries: 0 });
  session.token = ep.token;
  try {
    return await fn(adaptPlane(session, capabilitiesOf(r)), session);
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    if (err instanceof PlaneCallError) {
      if (err.status === 404) throw notFound(scrub(err.detail));
      if (err.status === 410) throw new ServiceError('conflict', `the browser is gone: ${scrub(err.detail)}`);
      if (err.status < 500) throw new ServiceError(err.status === 403 ? 'forbidden' : err.status === 422 ? 'unprocessable' : 'bad_request', scrub(err.detail));
      throw new ServiceError('upstream_unreachable', `the session's plane agent failed: ${scrub(err.detail)}`);
    }
    // the adapter's own refusals (a key combination dom_plane cannot press, a page script that threw)
    throw badRequest(scrub((err as Error).message ?? String(err)));
  } finally {
    session.disconnect();
  }
}

/** Where the active tab is after an action: the DOM's word on dom_plane, the page facts on computer_plane. */
async function where(plane: Plane): Promise<{ url: string; title: string }> {
  if (plane.dom) return plane.dom.evaluate<{ url: string; title: string }>('(() => ({ url: location.href, title: document.title }))()');
  const f = await plane.facts?.().catch(() => null);
  return { url: f?.url ?? '', title: f?.title ?? '' };
}

type Targeted = Pick<McpClick, 'ref' | 'selector' | 'label' | 'role' | 'name' | 'x' | 'y'>;

/** The point a target names, or undefined when no target was given; at most one kind of target. */
async function pointOf(plane: Plane, t: Targeted): Promise<{ x: number; y: number } | undefined> {
  const kinds = [t.ref !== undefined, t.selector !== undefined, t.label !== undefined, t.role !== undefined, t.x !== undefined].filter(Boolean).length;
  if (kinds > 1) throw badRequest('give one target: ref, selector, label, role with name, or x with y');
  if (kinds === 0) return undefined;
  if (t.x !== undefined && t.y !== undefined) return { x: t.x, y: t.y };
  if (!plane.dom) throw new ServiceError('conflict', 'a target by ref, selector, label or role needs a dom_plane session; on computer_plane give x and y (as on the screenshot)');
  const spec: TargetSpec = { ...(t.ref ? { ref: t.ref } : {}), ...(t.selector ? { selector: t.selector } : {}), ...(t.label ? { label: t.label } : {}), ...(t.role ? { role: t.role, name: t.name ?? '' } : {}) };
  const at = await plane.dom.evaluate<{ x: number; y: number; error?: string } | null>(locateScript(spec));
  if (!at || at.error) throw notFound(at?.error ?? 'the target is not on the page');
  return { x: at.x, y: at.y };
}

async function act(plane: Plane, a: Action): Promise<void> {
  const r = await plane.act(a);
  if (r.nav_error) throw unprocessable(`navigation failed: ${r.nav_error.code}: ${scrub(r.nav_error.message)}`);
}

async function sessionOpen(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  requireScope(c, 'run');
  if (c.browsers.size >= MAX_BROWSERS_PER_MCP_SESSION) throw new ServiceError('conflict', `this MCP session holds ${MAX_BROWSERS_PER_MCP_SESSION} browser sessions already; close one with session_close`);
  const tenant = c.tenant();
  const spec = specOf(args as SessionCreateRequest, tenant, c.s);
  // a session start costs a browser, as POST /v1/sessions does: one rate token
  await c.s.limits.takeRateToken(tenant);
  const r = await c.s.sessions.create(tenant, spec);
  // attached as a client: the session is not idle while this MCP session holds it, and ends with it
  const detach = c.s.sessions.attach(r, () => c.browsers.delete(r.session_id));
  c.browsers.set(r.session_id, detach);
  const { cdp_url: _cdp, ...body } = sessionBody(r, c.base);
  void _cdp;
  return json(body);
}

async function sessionClose(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  requireScope(c, 'run');
  const id = String(args.session_id);
  const detach = c.browsers.get(id);
  if (!detach) throw notFound(`no browser session ${id} in this MCP session`);
  c.browsers.delete(id);
  // released before detached: the last client leaving would end it as client_disconnected
  const r = await c.s.sessions.release(c.tenant(), id).finally(detach);
  const { cdp_url: _cdp, ...body } = sessionBody(r, c.base);
  void _cdp;
  return json(body);
}

async function navigate(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const a = args as unknown as McpNavigate;
  const r = await owned(c, a.session_id);
  return withPlane(c, r, async (plane) => {
    const done = await plane.act({ type: 'NAVIGATE', url: a.url });
    if (done.nav_error) throw unprocessable(`navigation failed: ${done.nav_error.code}: ${scrub(done.nav_error.message)}`);
    return json({ ...(await where(plane)), http_status: done.http_status ?? null });
  });
}

async function click(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const a = args as unknown as McpClick;
  const r = await owned(c, a.session_id);
  return withPlane(c, r, async (plane) => {
    const at = await pointOf(plane, a);
    if (!at) throw badRequest('click needs a target: ref, selector, label, role with name, or x with y');
    await act(plane, { type: a.double ? 'DOUBLE_CLICK' : 'CLICK', ...at });
    return json({ clicked: at, ...(await where(plane)) });
  });
}

async function typeText(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const a = args as unknown as McpType;
  const r = await owned(c, a.session_id);
  return withPlane(c, r, async (plane) => {
    const at = await pointOf(plane, a);
    if (at) await act(plane, { type: 'CLICK', ...at });
    await act(plane, { type: 'TYPE', text: a.text });
    if (a.submit) await act(plane, { type: 'KEY_PRESS', keys: 'Return' });
    return json({ typed: a.text.length, ...(at ? { into: at } : {}), ...(await where(plane)) });
  });
}

async function pressKey(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const a = args as unknown as McpPressKey;
  const r = await owned(c, a.session_id);
  return withPlane(c, r, async (plane) => {
    await act(plane, { type: 'KEY_PRESS', keys: a.key });
    return json({ pressed: a.key, ...(await where(plane)) });
  });
}

async function scroll(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const a = args as unknown as McpScroll;
  const r = await owned(c, a.session_id);
  return withPlane(c, r, async (plane) => {
    const before = plane.dom ? await plane.dom.evaluate<number>('Math.round(scrollY)') : undefined;
    await act(plane, { type: 'SCROLL', direction: a.direction ?? 'down', amount: a.amount ?? 3, ...(a.x !== undefined && a.y !== undefined ? { x: a.x, y: a.y } : {}) });
    // the page scrolls after the wheel event is dispatched: its position is read once it moved (or 0.5 s passed)
    const y = plane.dom ? await plane.dom.evaluate<number>(SCROLLED(before ?? 0)) : undefined;
    return json({ scrolled: a.direction ?? 'down', ...(y !== undefined ? { scroll_y: y } : {}), ...(await where(plane)) });
  });
}

async function snapshot(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const r = await owned(c, String(args.session_id));
  if (r.compute_backend !== 'dom_plane') throw new ServiceError('conflict', 'snapshot reads the DOM: it needs a dom_plane session (on computer_plane take a screenshot)');
  return withPlane(c, r, async (plane) => {
    const snap = await plane.dom!.evaluate<{ url: string; title: string; refs: number; cut: boolean; text: string }>(snapshotScript(SNAPSHOT_MAX_LINES, SNAPSHOT_MAX_CHARS));
    const head = `- Page URL: ${snap.url}\n- Page Title: ${snap.title}\n- Refs: ${snap.refs} (click and type take ref)${snap.cut ? '\n- (cut: the page is larger than the snapshot)' : ''}`;
    return { content: [{ type: 'text', text: `${head}\n\n${snap.text}` }], structuredContent: { url: snap.url, title: snap.title, refs: snap.refs, cut: snap.cut } };
  });
}

async function screenshot(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const r = await owned(c, String(args.session_id));
  const shot = await c.s.sessions.planeCall(r, fleetOf(c.s), 'screenshot', 'POST', { format: 'png' });
  const png = shot.blob ?? Buffer.alloc(0);
  if (png.length === 0) throw new ServiceError('upstream_unreachable', 'the plane answered no image');
  return { content: [{ type: 'image', data: png.toString('base64'), mimeType: 'image/png' }, { type: 'text', text: JSON.stringify({ width: shot.body.width, height: shot.body.height, bytes: png.length }) }] };
}

/** Rows read the way a plan's extract_data step reads them: the registered step handler on this page, then the runner's checks. */
async function extract(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  const a = args as unknown as McpExtract;
  const r = await owned(c, a.session_id);
  if (r.compute_backend !== 'dom_plane') throw new ServiceError('conflict', 'extract reads the DOM: it needs a dom_plane session');
  const handler = c.s.plugins.stepHandler('extract_data');
  if (!handler) throw new ServiceError('unavailable', 'no extract_data step handler is registered on this gateway');
  const step: Step = { intent: 'extract rows (MCP extract tool)', type: 'extract_data', extract: a.extract };
  return withPlane(c, r, async (plane) => {
    const ac = new AbortController();
    const ctx: StepContext = {
      runId: r.session_id,
      tenantId: r.tenant_id,
      allowedDomains: c.tenant().allowed_domains,
      step,
      path: 'extract',
      plane,
      signal: ac.signal,
      recipe: () => Promise.reject(notFound('recipes are not resolved by the extract tool: give the extract block')),
      callTool: () => Promise.reject(notFound('host tools are not reachable from the extract tool')),
      addCost: () => undefined,
      log: () => undefined,
    };
    const done = await handler.run(ctx);
    if (!done.success) throw unprocessable(`extract failed (${done.failure_class ?? 'extractor_error'}): ${scrub(done.data ?? 'no rows')}`);
    const checked = checkStepRows(step, done.rows ?? [], done.excluded_cards ?? 0);
    if (checked.problem) throw unprocessable(`extract failed: ${checked.problem}`);
    return json({ rows: checked.rows, count: checked.rows.length, note: checked.note, ...(await where(plane)) });
  });
}

export const BROWSER_TOOLS: Record<string, { description: string; readOnly?: boolean; run(c: McpContext, args: ToolArgs): Promise<ToolOutput> }> = {
  session_open: { description: "Open a browser session on runplane's fleet (dom_plane by default; computer_plane for a real display). Options: compute_backend, viewport, proxy_provider/proxy_city/proxy_state (geo), proxy_disabled, profile_id, plane_labels, timeout_seconds. Returns session_id for the other browser tools. Holds one of the tenant's concurrent run slots until session_close or the end of this MCP session", run: sessionOpen },
  navigate: { description: 'Load an http(s) URL in the session\'s active tab; answers the URL and title it landed on', run: navigate },
  click: { description: 'Click a target: ref (from snapshot), selector, label, role with name (dom_plane), or x with y (either plane, CSS pixels as on the screenshot). double: a double click', run: click },
  type: { description: 'Type text as key presses, into a target (clicked first; same targets as click) or the focused element; submit presses Enter after', run: typeText },
  press_key: { description: 'Press one key (Enter, Tab, Escape, Backspace, ArrowDown, PageDown, a character); combinations such as ctrl+a on computer_plane', run: pressKey },
  scroll: { description: 'Turn the mouse wheel (direction, amount in notches), at x,y or the page center', run: scroll },
  snapshot: { description: 'The page as an accessibility snapshot: roles, names and text, with a ref (e12) on every interactive element for click and type (dom_plane). A new snapshot replaces the refs', readOnly: true, run: snapshot },
  screenshot: { description: "A PNG of the session's viewport (either plane)", readOnly: true, run: screenshot },
  extract: { description: "Rows from the page by an extract block as a plan's extract_data step takes it: item_selector for each row, fields with selector (and attr); typed, checked and capped (max_items) as a run's rows are (dom_plane)", readOnly: true, run: extract },
  session_close: { description: 'Close a browser session this MCP session opened: its browser closes and its slot is free', run: sessionClose },
};
