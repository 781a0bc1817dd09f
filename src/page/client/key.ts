// Where the page keeps the read key: in this tab's session storage only. A key handed over in the
// URL's fragment (`#key=hrr_…`, which browsers never send to the server) is moved there and the
// fragment cleared, so it stays out of the history, the address bar and every server log.

const STORAGE = "headroom.readKey";

/** Takes a key from the fragment into session storage; returns the key the tab holds, if any. */
export function takeKey(): string | null {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const given = fragment.get("key");
  if (given !== null) {
    fragment.delete("key");
    const rest = fragment.toString();
    history.replaceState(
      null,
      "",
      `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`,
    );
    if (given.trim() !== "") sessionStorage.setItem(STORAGE, given.trim());
  }
  return sessionStorage.getItem(STORAGE);
}

export function saveKey(key: string) {
  sessionStorage.setItem(STORAGE, key.trim());
}

export function forgetKey() {
  sessionStorage.removeItem(STORAGE);
}
