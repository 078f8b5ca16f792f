"""What each seed of Weave-Web-5 varies, and where its Review Board draws (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the shop (products,
markets, the translation memory and price list in ~/catalog.db, the reviewer's marks) and one geometry of the
board: the fixture draws at these positions and the oracle reads there.

The catalog holds, per product and locale, the approved title and older approved titles it superseded, and
now and then a newer draft that is not approved yet: the right title is the newest approved one. The price
in a market is the base price (EUR) times the market currency's newest exchange rate, rounded up to the
market's price step, minus the market's price ending (a 9.99-style price point).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

import numpy as np

from weavegym.envs.tasks import pixel_font

CJK, EUROPE, RTL = "cjk", "europe", "rtl"
# market: (locale, currency, kind, price step, price ending, exchange rate EUR -> currency around)
MARKETS: dict[str, tuple[str, str, str, str, str, float]] = {
    "JP": ("ja-JP", "JPY", CJK, "10", "0", 162.0), "CN": ("zh-CN", "CNY", CJK, "1", "0.01", 7.7),
    "KR": ("ko-KR", "KRW", CJK, "100", "0", 1460.0), "DE": ("de-DE", "EUR", EUROPE, "1", "0.05", 1.0),
    "FR": ("fr-FR", "EUR", EUROPE, "0.5", "0.01", 1.0), "PL": ("pl-PL", "PLN", EUROPE, "1", "0.01", 4.3),
    "ES": ("es-ES", "EUR", EUROPE, "1", "0.01", 1.0), "SA": ("ar-SA", "SAR", RTL, "5", "0.05", 4.05),
    "IL": ("he-IL", "ILS", RTL, "1", "0.1", 3.95),
}
LANGS = ("ja", "zh", "ko", "de", "fr", "pl", "es", "ar", "he")
# product: (English name, base price EUR range, titles in LANGS order)
PRODUCTS: tuple[tuple[str, tuple[float, float], tuple[str, ...]], ...] = (
    ("Matcha latte tin", (8, 19), ("抹茶ラテ缶", "抹茶拿铁罐", "말차 라떼 캔", "Matcha-Latte-Dose",
                                  "Boîte de latte matcha", "Puszka latte matcha",
                                  "Lata de té matcha", "علبة لاتيه ماتشا", "פחית לאטה מאצ'ה")),
    ("Thermal mug", (12, 29), ("保温マグ", "保温杯", "보온 머그컵", "Thermobecher", "Mug isotherme", "Kubek termiczny",
                               "Taza térmica", "كوب حراري", "ספל תרמי")),
    ("Desk lamp", (24, 69), ("デスクライト", "台灯", "책상 조명", "Schreibtischlampe", "Lampe de bureau",
                             "Lampka biurkowa", "Lámpara de escritorio", "مصباح مكتب", "מנורת שולחן")),
    ("Wool scarf", (19, 49), ("ウールのマフラー", "羊毛围巾", "울 목도리", "Wollschal", "Écharpe en laine",
                              "Wełniany szalik", "Bufanda de lana", "وشاح صوف", "צעיף צמר")),
    ("Notebook set", (6, 18), ("ノートセット", "笔记本套装", "노트 세트", "Notizbuch-Set", "Lot de carnets",
                               "Zestaw notesów", "Juego de cuadernos", "طقم دفاتر", "סט מחברות")),
    ("Ceramic teapot", (21, 58), ("陶器の急須", "陶瓷茶壶", "도자기 찻주전자", "Keramik-Teekanne",
                                  "Théière en céramique", "Ceramiczny dzbanek",
                                  "Tetera de cerámica", "إبريق شاي خزفي", "קומקום קרמיקה")),
    ("Hiking socks", (9, 22), ("登山用ソックス", "登山袜", "등산 양말", "Wandersocken", "Chaussettes de randonnée",
                               "Skarpety trekkingowe", "Calcetines de montaña", "جوارب المشي", "גרבי טיולים")),
    ("Linen apron", (14, 36), ("リネンのエプロン", "亚麻围裙", "린넨 앞치마", "Leinenschürze", "Tablier en lin",
                               "Lniany fartuch", "Delantal de lino", "مريلة كتان", "סינר פשתן")),
    ("Oak cutting board", (18, 52), ("オークのまな板", "橡木砧板", "오크 도마", "Schneidebrett aus Eiche",
                                     "Planche à découper en chêne", "Dębowa deska do krojenia", "Tabla de roble",
                                     "لوح تقطيع من البلوط", "קרש חיתוך מעץ אלון")),
    ("Bamboo lunch box", (11, 27), ("竹のお弁当箱", "竹制饭盒", "대나무 도시락", "Brotdose aus Bambus",
                                    "Boîte à lunch en bambou", "Bambusowy lunchbox", "Fiambrera de bambú",
                                    "علبة غداء من الخيزران", "קופסת אוכל מבמבוק")),
    ("Glass water bottle", (13, 31), ("ガラスの水筒", "玻璃水瓶", "유리 물병", "Glastrinkflasche", "Gourde en verre",
                                      "Szklana butelka", "Botella de vidrio", "زجاجة ماء زجاجية", "בקבוק מים מזכוכית")),
    ("Canvas tote bag", (10, 26), ("キャンバストート", "帆布手提袋", "캔버스 토트백", "Tragetasche aus Canvas",
                                   "Sac cabas en toile", "Płócienna torba", "Bolsa de lona", "حقيبة قماش",
                                   "תיק בד קנבס")),
)
# Words an older approved title carried (a launch "new" badge, since dropped) and a newer draft adds (not
# approved yet): the titles the newest-approved rule must skip.
OLD_WORD = {"ja": "新発売", "zh": "新款", "ko": "신제품", "de": "Neu", "fr": "Nouveau", "pl": "Nowość", "es": "Nuevo",
            "ar": "جديد", "he": "חדש"}
DRAFT_WORD = {"ja": "セール", "zh": "促销", "ko": "세일", "de": "Angebot", "fr": "Promo", "pl": "Promocja",
              "es": "Oferta", "ar": "تخفيض", "he": "מבצע"}
N_PRODUCTS, N_MARKETS = 7, 4
OK, WRONG_TITLE, WRONG_PRICE, NO_TITLE = "OK", "WRONG TITLE", "WRONG PRICE", "TITLE MISSING"
SCHEMA = ("CREATE TABLE products (code TEXT PRIMARY KEY, name_en TEXT NOT NULL, base_price_eur TEXT NOT NULL);"
          "CREATE TABLE markets (market TEXT PRIMARY KEY, locale TEXT NOT NULL, currency TEXT NOT NULL, "
          "price_step TEXT NOT NULL, price_ending TEXT NOT NULL);"
          "CREATE TABLE rates (currency TEXT NOT NULL, eur_rate TEXT NOT NULL, valid_from TEXT NOT NULL);"
          "CREATE TABLE titles (code TEXT NOT NULL, locale TEXT NOT NULL, title TEXT NOT NULL, "
          "status TEXT NOT NULL, updated TEXT NOT NULL);")

# ---- the Review Board's geometry (pixels inside its window) ----------------------------------------------------

SCALE, HEADING_AT = 2, (16, 12)
BOARD_TITLE, BOARD_HEADING = "Review Board", "STOREFRONT REVIEW"
BOARD_SIZE, BOARD_AT = (480, 560), (0, 0)
TABS_X, TABS_Y, TAB_W, TAB_H, TAB_STEP = 16, 48, 100, 34, 110  # one button per market, in a row
PAGE_TEXT, LINE_H, LINE_CHARS, MAX_LINES = (24, 104), 26, 36, 14
BROWSER_AT, BROWSER_SIZE = (492, 0), (780, 620)  # beside the board


def board_layout() -> dict[str, Any]:
    """Where the Review Board puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": BOARD_TITLE, "heading": BOARD_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "size": list(BOARD_SIZE), "at": list(BOARD_AT), "tabs": [TABS_X, TABS_Y, TAB_W, TAB_H, TAB_STEP],
            "page_text": list(PAGE_TEXT), "line_h": LINE_H}


def tab_centre(origin: Sequence[int], index: int) -> list[int]:
    return [origin[0] + TABS_X + index * TAB_STEP + TAB_W // 2, origin[1] + TABS_Y + TAB_H // 2]


# ---- what each seed varies --------------------------------------------------------------------------------------

def nfc(text: str) -> str:
    """A title compared as a person would: Unicode NFC, runs of white space as one space."""
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def local_price(base: str, rate: str, step: str, ending: str) -> Decimal:
    """base x rate, rounded up to a multiple of step, minus the ending (the rule the instruction states)."""
    steps = (Decimal(base) * Decimal(rate) / Decimal(step)).to_integral_value(rounding=ROUND_CEILING)
    return steps * Decimal(step) - Decimal(ending)


def _rates(rng: np.random.Generator, currency: str, around: float) -> list[tuple[str, str, str]]:
    """Three dated rates of ``currency``, in shuffled order; the newest (the one that counts) is not the largest."""
    if currency == "EUR":
        return [("EUR", "1", "2026-01-01")]
    digits = 2 if around > 100 else 4
    dates = sorted(f"2026-{m:02d}-{int(rng.integers(1, 28)):02d}" for m in rng.choice(np.arange(6, 12), 3,
                                                                                         replace=False))
    values = sorted({round(around * float(rng.uniform(0.93, 1.07)), digits) for _ in range(3)})
    while len(values) < 3:
        values.append(round(values[-1] * 1.01, digits))
    order = [1, 2, 0] if rng.random() < 0.5 else [2, 0, 1]  # the newest is the middle or the smallest value
    rows = [(currency, f"{values[o]:.{digits}f}", d) for o, d in zip(order, dates, strict=True)]
    return [rows[int(i)] for i in rng.permutation(3)]


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's shop: products, markets, the catalog's rows, the reviewer's marks and the right fixes."""
    picks = [int(i) for i in rng.choice(len(PRODUCTS), N_PRODUCTS, replace=False)]
    codes = [f"P-{int(c)}" for c in rng.choice(np.arange(1000, 9999), N_PRODUCTS, replace=False)]
    kinds = {k: [m for m, v in MARKETS.items() if v[2] == k] for k in (CJK, EUROPE, RTL)}
    markets = [str(rng.choice(kinds[CJK])), str(rng.choice(kinds[EUROPE])), str(rng.choice(kinds[RTL]))]
    markets.append(str(rng.choice([m for m in MARKETS if m not in markets])))
    markets = [markets[int(i)] for i in rng.permutation(N_MARKETS)]
    rates = [row for cur, around in {MARKETS[m][1]: MARKETS[m][5] for m in MARKETS}.items()
             for row in _rates(rng, cur, around)]
    newest = {cur: max((r for r in rates if r[0] == cur), key=lambda r: r[2])[1] for cur, *_ in rates}
    products = []
    for code, pick in zip(codes, picks, strict=True):
        name, (low, high), _titles = PRODUCTS[pick]
        products.append({"code": code, "name_en": name, "pick": pick,
                         "base": f"{float(rng.uniform(low, high)):.2f}"})
    titles: list[tuple[str, str, str, str, str]] = []
    for p in products:
        for lang_index, lang in enumerate(LANGS):
            locale = next(v[0] for v in MARKETS.values() if v[0].startswith(lang + "-"))
            right = PRODUCTS[p["pick"]][2][lang_index]
            day = int(rng.integers(1, 28))
            old = f"{right} {OLD_WORD[lang]}" if lang not in ("ja", "zh") else f"{right}{OLD_WORD[lang]}"
            titles.append((p["code"], locale, old, "approved", f"2026-0{int(rng.integers(3, 7))}-{day:02d}"))
            titles.append((p["code"], locale, right, "approved", f"2026-0{int(rng.integers(7, 10))}-{day:02d}"))
            if rng.random() < 0.4:
                draft = f"{right} {DRAFT_WORD[lang]}"
                titles.append((p["code"], locale, draft, "draft", f"2026-{int(rng.integers(10, 12))}-{day:02d}"))
    titles = [titles[int(i)] for i in rng.permutation(len(titles))]
    pages: dict[str, list[tuple[str, str]]] = {}
    fixes: dict[str, dict[str, str]] = {}  # "CODE/MARKET": {"product", "market", "title", "price"}
    flag_kinds = (WRONG_TITLE, WRONG_PRICE, NO_TITLE)
    for market in markets:
        locale, _cur, _kind, step, ending, _around = MARKETS[market]
        flagged = {int(i) for i in rng.choice(N_PRODUCTS, int(rng.integers(1, 3)), replace=False)}
        rows = []
        for i, p in enumerate(products):
            mark = flag_kinds[int(rng.integers(3))] if i in flagged else OK
            rows.append((p["code"], mark))
            if mark != OK:
                right = PRODUCTS[p["pick"]][2][LANGS.index(locale[:2])]
                price = local_price(p["base"], newest[MARKETS[market][1]], step, ending)
                fixes[f"{p['code']}/{market}"] = {"product": p["code"], "market": market, "title": right,
                                                  "price": f"{price:.2f}"}
        pages[market] = rows
    return {"products": products, "markets": markets, "rates": rates, "titles": titles, "pages": pages,
            "fixes": fixes, "newest_rates": newest}


def database_rows(p: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of ~/catalog.db: every market of the shop (not only the four reviewed) and every product."""
    return {"products": [(x["code"], x["name_en"], x["base"]) for x in sorted(p["products"], key=lambda x: x["code"])],
            "markets": [(m, v[0], v[1], v[3], v[4]) for m, v in sorted(MARKETS.items())],
            "rates": list(p["rates"]), "titles": list(p["titles"])}


def page_lines(market: str, rows: Sequence[tuple[str, str]]) -> list[str]:
    """The dot-matrix lines of one market's review page."""
    head = [f"MARKET {market} - {MARKETS[market][0].upper()}", "PRODUCT   REVIEW", ""]
    return head + [f"{code:<9} {mark}" for code, mark in rows]


def board_pages(p: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the fixture gets on stdin: per market tab, its label and its page's lines."""
    return [{"market": m, "lines": page_lines(m, p["pages"][m])} for m in p["markets"]]


def rounding_is_safe(p: Mapping[str, Any]) -> bool:
    """No price lands within a hair of a step boundary (a float computation would then round the other way)."""
    for fix in p["fixes"].values():
        product = next(x for x in p["products"] if x["code"] == fix["product"])
        _locale, cur, _kind, step, _ending, _around = MARKETS[fix["market"]]
        q = float(product["base"]) * float(p["newest_rates"][cur]) / float(step)
        if abs(q - round(q)) < 1e-6 or math.isclose(q, math.ceil(q)):
            return False
    return True


# ---- reading the board off the screen (the oracle's eyes; setup's readiness check) --------------------------------

def origin(image: np.ndarray, window: Sequence[int], reach: int = 40) -> tuple[int, int] | None:
    """The board's top-left on screen where its heading reads back near ``window`` (None while it is not drawn)."""
    offsets = sorted(((dx, dy) for dx in range(-reach, reach + 1) for dy in range(-reach, reach + 1)),
                     key=lambda d: abs(d[0]) + abs(d[1]))
    for dx, dy in offsets:
        x, y = window[0] + dx + HEADING_AT[0], window[1] + dy + HEADING_AT[1]
        if pixel_font.read_text(image, x, y, SCALE, 1) == BOARD_HEADING[0] and \
                pixel_font.read_text(image, x, y, SCALE, len(BOARD_HEADING)) == BOARD_HEADING:
            return window[0] + dx, window[1] + dy
    return None


def read_page(image: np.ndarray, at: Sequence[int]) -> list[str]:
    """The page's lines as drawn (trailing blank lines cut) on the board at ``at``."""
    lines = [pixel_font.read_text(image, at[0] + PAGE_TEXT[0], at[1] + PAGE_TEXT[1] + i * LINE_H, SCALE, LINE_CHARS)
             for i in range(MAX_LINES)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def flagged(lines: Sequence[str]) -> list[str]:
    """The product codes a page marks as anything but OK."""
    found = []
    for line in lines[3:]:
        code, _sep, mark = line.partition(" ")
        if code.startswith("P-") and mark.strip() and mark.strip() != OK:
            found.append(code)
    return found
