// A small element builder: the page's markup as code, text always set as text (never as HTML).

type Attrs = Record<string, string | number | boolean | null | undefined>;
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing from the page`);
  return el as T;
}

/** Replaces a table body's rows; an empty list shows `empty` in one cell across the table. */
export function fillTable(table: HTMLTableElement, rows: HTMLTableRowElement[], empty: string) {
  const body = table.tBodies[0] ?? table.createTBody();
  const columns = table.tHead?.rows[0]?.cells.length ?? 1;
  body.replaceChildren(
    ...(rows.length > 0
      ? rows
      : [h("tr", {}, h("td", { colspan: columns, class: "empty" }, empty))]),
  );
}
