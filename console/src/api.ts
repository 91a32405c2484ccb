// HTTP access to meshlink-cp's REST API (docs/api.md). The admin token is
// kept in sessionStorage (gone when the browser tab closes) and sent only as
// `Authorization: Bearer`, never in a URL.

const TOKEN_KEY = "meshlink.adminToken";

/** An API error with the control plane's message (`{"error": {...}}`). */
export class ApiError extends Error {
  constructor(
    public status: number,
    public reason: string,
    message: string,
  ) {
    super(message);
  }
}

export function savedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function saveToken(token: string) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** GETs `path` with the session's token and parses the JSON answer. */
export async function apiGet<T = any>(path: string, signal?: AbortSignal, token = savedToken()): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      headers: { Authorization: `Bearer ${token ?? ""}`, Accept: "application/json" },
      signal,
      cache: "no-store",
    });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new ApiError(0, "Unreachable", `the control plane did not answer (${(e as Error).message})`);
  }
  const text = await res.text();
  let body: any = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const err = body?.error;
    throw new ApiError(
      res.status,
      err?.reason ?? res.statusText,
      err?.message ?? `${res.status} ${res.statusText}: ${text.slice(0, 200)}`,
    );
  }
  if (body === null) throw new ApiError(res.status, "BadBody", `unreadable answer from ${path}`);
  return body as T;
}
