// A package loaded the first time it is needed, once. A process's start pays
// for every package it imports (sharp ~0.2 s, bullmq ~0.5 s, pg ~0.2 s on this
// host): those a default start never uses wait for their first caller.
export function loadOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => (loading ??= load());
}

/** sharp, loaded on first use (a native module: its load is most of a first call's cost). */
export const loadSharp = loadOnce(async () => (await import('sharp')).default);

/** pg, loaded when a store is opened on PostgreSQL. */
export const loadPg = loadOnce(async () => (await import('pg')).default);
