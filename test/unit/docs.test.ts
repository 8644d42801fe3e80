import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The design lives in the repository (docs/architecture.md, docs/walkthroughs.md) and stays true:
 * every link of the README and the docs lands on a file of the repository, every file a doc names
 * exists, every function and constant a doc names is declared in the file named beside it, every
 * code snippet a numbers table quotes is in the file it cites, and every ADR decision the code
 * cites has its heading in docs/architecture.md.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ARCHITECTURE = 'docs/architecture.md';
const WALKTHROUGHS = 'docs/walkthroughs.md';

function read(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

function docFiles(): string[] {
  const docs = existsSync(join(ROOT, 'docs'))
    ? readdirSync(join(ROOT, 'docs'))
        .filter((name) => name.endsWith('.md'))
        .map((name) => `docs/${name}`)
    : [];
  return ['README.md', ...docs];
}

/** The text outside fenced code blocks, lines kept in place (code lines left empty). */
function prose(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** The contents of the inline code spans of `text`. */
function codeSpans(text: string): string[] {
  return [...text.matchAll(/`([^`\n]+)`/g)].map((match) => match[1] as string);
}

/** Every link target of a Markdown text: inline links, reference definitions, autolinks, hrefs, bare URLs. */
function linkTargets(markdown: string): string[] {
  const text = prose(markdown).replace(/`[^`\n]+`/g, 'code');
  return [
    ...[...text.matchAll(/\]\(\s*<?([^()\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1] as string),
    ...[...text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((match) => match[1] as string),
    ...[...text.matchAll(/\bhref="([^"]*)"/g)].map((match) => match[1] as string),
    ...[...text.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi)].map((match) => match[1] as string),
    // GitHub turns a bare URL in prose into a link of its own.
    ...[...text.matchAll(/(?<![(<"])\bhttps?:\/\/[^\s)>]+/g)].map((match) => match[0]),
  ];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function headingSlug(heading: string): string {
  return heading
    .replace(/<[^>]*>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a Markdown file offers: explicit ids and its headings' slugs. */
const anchorCache = new Map<string, Set<string>>();
function anchorsOf(markdown: string): Set<string> {
  const cached = anchorCache.get(markdown);
  if (cached) return cached;
  const text = prose(markdown);
  const anchors = new Set([...text.matchAll(/\bid="([^"]+)"/g)].map((match) => match[1] as string));
  const seen = new Map<string, number>();
  for (const match of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = headingSlug(match[1] as string);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  anchorCache.set(markdown, anchors);
  return anchors;
}

const TOP_LEVEL = new Set(readdirSync(ROOT).filter((name) => name !== 'node_modules' && name !== '.git'));

/** A code span that names a path of the repository: no spaces, a slash, a first segment at its top. */
function isRepoPath(span: string): boolean {
  if (!/^[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.+-]*)+$/.test(span)) return false;
  return TOP_LEVEL.has(span.split('/')[0] as string);
}

/**
 * The blocks a doc names things in: paragraphs, list items and table rows. A function or constant a
 * block names must be declared in a file the same block names.
 */
function blocks(markdown: string): string[] {
  const out: string[] = [];
  let current: string[] = [];
  const flush = () => {
    if (current.length > 0) out.push(current.join('\n'));
    current = [];
  };
  for (const line of prose(markdown).split('\n')) {
    if (line.trim() === '') flush();
    else if (/^\s*\|/.test(line)) {
      flush();
      out.push(line);
    } else {
      if (/^\s*(?:[-*]|\d+\.)\s/.test(line) || /^#{1,6}\s/.test(line)) flush();
      current.push(line);
    }
  }
  flush();
  return out;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Whether `source` declares `name`: a function, class, constant, type, method, Lua local function, or
 * a property at the start of a line (a setting of the environment's schema).
 */
function declares(source: string, name: string): boolean {
  const n = escapeRegExp(name);
  return [
    new RegExp(`\\bfunction\\s*\\*?\\s+${n}\\s*[<(]`),
    new RegExp(`\\bclass\\s+${n}\\b`),
    new RegExp(`\\b(?:const|let|var)\\s+${n}\\s*[:=]`),
    new RegExp(`\\b(?:interface|type)\\s+${n}\\b`),
    new RegExp(
      `^\\s*(?:(?:public|private|protected|static|async|override|readonly|get|set)\\s+)*#?${n}\\s*[<(]`,
      'm',
    ),
    new RegExp(`\\blocal\\s+function\\s+${n}\\s*\\(`),
    new RegExp(`^\\s*${n}\\s*:`, 'm'),
  ].some((pattern) => pattern.test(source));
}

/** Collapses runs of whitespace, so a quoted snippet matches however the file wraps it. */
function squeeze(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** Every source file under `dir` (TypeScript, JavaScript and Lua). */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    for (const entry of readdirSync(join(ROOT, path), { withFileTypes: true })) {
      const child = `${path}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (/\.(?:ts|js|cjs|mjs|lua)$/.test(entry.name)) out.push(child);
    }
  };
  walk(dir);
  return out;
}

/**
 * The ADR decisions a text cites: `ADR-0127 d4`, `ADR-0127 d2, d3`, `ADR-0127 d5–d6`,
 * `ADR-0130 decisions 1–3` each give their decisions; a bare `ADR-0159` gives the record.
 */
function adrCitations(text: string): Array<{ adr: string; decision: number | null }> {
  const cites: Array<{ adr: string; decision: number | null }> = [];
  const pattern =
    /ADR-(\d{4})((?:(?:,\s*|\s+and\s+|\s+)(?:d|decisions?\s+)\d+(?:\s*[–-]\s*(?:d)?\d+)?(?![\w-]))*)/g;
  for (const match of text.matchAll(pattern)) {
    const adr = `ADR-${match[1]}`;
    cites.push({ adr, decision: null });
    for (const item of (match[2] ?? '').matchAll(/(\d+)(?:\s*[–-]\s*d?(\d+))?/g)) {
      const from = Number(item[1]);
      const to = item[2] === undefined ? from : Number(item[2]);
      for (let decision = from; decision <= to; decision += 1) cites.push({ adr, decision });
    }
  }
  return cites;
}

describe('the design in the repository', () => {
  it('is linked from the README: the architecture and the walkthroughs', () => {
    const targets = linkTargets(read('README.md')).map((target) => target.split('#')[0]);
    expect(targets).toContain(ARCHITECTURE);
    expect(targets).toContain(WALKTHROUGHS);
  });

  it('links only to files inside the repository, from the README and every doc', () => {
    const broken: string[] = [];
    const files = docFiles();
    // Never vacuous: the README and both docs are read.
    expect(files).toEqual(expect.arrayContaining(['README.md', ARCHITECTURE, WALKTHROUGHS]));
    for (const file of files) {
      for (const target of linkTargets(read(file))) {
        if (/^(?:[a-z][a-z0-9+.-]*:|\/\/)/i.test(target)) {
          broken.push(`${file}: ${target} leads outside the repository`);
          continue;
        }
        const [path = '', anchor] = target.split('#');
        const resolved = path === '' ? join(ROOT, file) : resolve(ROOT, dirname(file), decodeURI(path));
        const inside = relative(ROOT, resolved);
        if (inside.startsWith('..') || resolve(ROOT, inside) !== resolved) {
          broken.push(`${file}: ${target} leads outside the repository`);
          continue;
        }
        if (!existsSync(resolved)) {
          broken.push(`${file}: ${target} names no file`);
          continue;
        }
        if (anchor && statSync(resolved).isFile() && resolved.endsWith('.md')) {
          if (!anchorsOf(readFileSync(resolved, 'utf8')).has(anchor))
            broken.push(`${file}: ${target} names no heading or anchor of ${inside}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('names only files that exist', () => {
    const missing: string[] = [];
    let named = 0;
    for (const file of [ARCHITECTURE, WALKTHROUGHS]) {
      for (const span of codeSpans(prose(read(file)))) {
        if (!isRepoPath(span)) continue;
        named += 1;
        if (!existsSync(join(ROOT, span))) missing.push(`${file}: ${span}`);
      }
    }
    expect(named).toBeGreaterThan(40);
    expect(missing).toEqual([]);
  });

  it('names each function and constant beside a file that declares it', () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const file of [ARCHITECTURE, WALKTHROUGHS]) {
      for (const block of blocks(read(file))) {
        const spans = codeSpans(block);
        const sources = spans
          .filter((span) => isRepoPath(span) && existsSync(join(ROOT, span)))
          .filter((span) => statSync(join(ROOT, span)).isFile())
          .map((span) => ({ path: span, text: read(span) }));
        for (const span of spans) {
          // `name()`, `Class.method()`: a function; `SCREAMING_CASE`: a constant.
          const fn = /^(?:([A-Z][A-Za-z0-9]*)\.)?#?([A-Za-z_$][\w$]*)\(\)$/.exec(span);
          const constant = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/.exec(span);
          if (!fn && !constant) continue;
          checked += 1;
          const owner = fn?.[1];
          const name = fn ? (fn[2] as string) : span;
          const found = sources.some(
            ({ text }) => declares(text, name) && (owner === undefined || declares(text, owner)),
          );
          if (!found)
            wrong.push(
              `${file}: ${span} is declared in none of the files its block names (${sources.map((s) => s.path).join(', ') || 'none'})`,
            );
        }
      }
    }
    expect(checked).toBeGreaterThan(40);
    expect(wrong).toEqual([]);
  });

  it("quotes each number's code as the file it cites has it", () => {
    const wrong: string[] = [];
    let quoted = 0;
    for (const row of read(ARCHITECTURE).split('\n')) {
      if (!/^\s*\|/.test(row)) continue;
      const cells = row
        .trim()
        .replace(/^\||\|$/g, '')
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim());
      const snippet = /^`([^`]+)`$/.exec(cells.at(-1) ?? '')?.[1];
      if (snippet === undefined || isRepoPath(snippet)) continue;
      const paths = cells.slice(0, -1).flatMap((cell) => codeSpans(cell).filter(isRepoPath));
      if (paths.length === 0) continue;
      quoted += 1;
      const holds = paths.some(
        (path) => existsSync(join(ROOT, path)) && squeeze(read(path)).includes(squeeze(snippet)),
      );
      if (!holds) wrong.push(`${snippet} is not in ${paths.join(', ')}`);
    }
    expect(quoted).toBeGreaterThan(30);
    expect(wrong).toEqual([]);
  });

  it('has a heading for every ADR decision the code cites', () => {
    const architecture = existsSync(join(ROOT, ARCHITECTURE)) ? read(ARCHITECTURE) : '';
    const anchors = anchorsOf(architecture);
    const headings = [...prose(architecture).matchAll(/^#{1,6}\s+(.+)$/gm)].map(
      (match) => match[1] as string,
    );
    const cited = new Map<string, string>();
    for (const dir of ['libs', 'apps', 'queues'])
      for (const file of sourceFiles(dir))
        for (const { adr, decision } of adrCitations(read(file))) {
          const label = decision === null ? adr : `${adr} d${decision}`;
          if (!cited.has(label)) cited.set(label, file);
        }
    // Never vacuous: the code cites the lease decisions by number.
    expect([...cited.keys()]).toEqual(expect.arrayContaining(['ADR-0127 d4', 'ADR-0130 d7', 'ADR-0177']));
    const missing: string[] = [];
    for (const [label, file] of cited) {
      const anchor = label.toLowerCase().replace(' ', '-');
      const headed = headings.some((heading) => new RegExp(`(?:^|\\W)${label}(?![\\w-])`).test(heading));
      if (!anchors.has(anchor) || !headed) missing.push(`${label} (cited in ${file})`);
    }
    expect(missing).toEqual([]);
  });

  it('reads the ADR citations of the code as written', () => {
    const labels = (text: string) =>
      adrCitations(text).map(({ adr, decision }) => (decision === null ? adr : `${adr} d${decision}`));
    expect(labels('// ADR-0127 d4: kept')).toEqual(['ADR-0127', 'ADR-0127 d4']);
    expect(labels('(DESIGN §5, ADR-0127 d1, d5, d8)')).toEqual([
      'ADR-0127',
      'ADR-0127 d1',
      'ADR-0127 d5',
      'ADR-0127 d8',
    ]);
    expect(labels('ADR-0127 d5–d6: renew')).toEqual(['ADR-0127', 'ADR-0127 d5', 'ADR-0127 d6']);
    expect(labels('ADR-0130 decisions 1–3')).toEqual([
      'ADR-0130',
      'ADR-0130 d1',
      'ADR-0130 d2',
      'ADR-0130 d3',
    ]);
    expect(labels("ADR-0130 d1's worst case; ADR-0159: settle")).toEqual([
      'ADR-0130',
      'ADR-0130 d1',
      'ADR-0159',
    ]);
  });

  it('cites no issue numbers: the history is in git', () => {
    const cited = [ARCHITECTURE, WALKTHROUGHS].flatMap((file) =>
      [...read(file).matchAll(/\bissues?\s+#?\d+/gi)].map((match) => `${file}: ${match[0]}`),
    );
    expect(cited).toEqual([]);
  });
});
