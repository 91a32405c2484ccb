// Entry point: login (admin token, kept in sessionStorage for this browser
// session only), then the shell with its pages. Every failure is shown as a
// message; the page is never left blank.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError, forgetToken, saveToken, savedToken } from "./api";
import { Store } from "./store";
import { Shell } from "./shell";
import "./style.css";

function Login({ error, busy, onSubmit }: { error: string; busy: boolean; onSubmit: (t: string) => void }) {
  const [token, setToken] = useState("");
  return (
    <main class="login">
      <h1>meshlink console</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          onSubmit(token.trim());
        }}
      >
        <label for="token">Admin token</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          placeholder="contents of <data-dir>/admin-token"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy || !token.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {error && (
          <p class="error" role="alert" id="login-error">
            {error}
          </p>
        )}
        <p class="hint">The token stays in this browser tab only (session storage) and is sent as an Authorization header.</p>
      </form>
    </main>
  );
}

function App() {
  const [store, setStore] = useState<Store | null>(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  async function login(token: string) {
    setBusy(true);
    setError("");
    saveToken(token);
    const s = new Store();
    s.onUnauthorized = (message) => {
      s.stop();
      forgetToken();
      setStore(null);
      setError(`Signed out: the control plane no longer accepts this token (${message}).`);
    };
    try {
      await s.start();
      setStore(s);
    } catch (e) {
      s.stop();
      forgetToken();
      setError(
        e instanceof ApiError && e.status === 401
          ? `Wrong admin token: the control plane answered 401 (${e.message}).`
          : `Could not load the console: ${(e as Error).message}`,
      );
    } finally {
      setBusy(false);
    }
  }

  useEffect(() => {
    const t = savedToken();
    if (t) void login(t);
  }, []);

  if (!store) return <Login error={error} busy={busy} onSubmit={login} />;
  return (
    <Shell
      store={store}
      onLogout={() => {
        store.stop();
        forgetToken();
        setStore(null);
      }}
    />
  );
}

addEventListener("unhandledrejection", (e) => console.error("unhandled", e.reason));
const root = document.getElementById("app")!;
root.textContent = ""; // the "Loading…" placeholder
render(<App />, root);
