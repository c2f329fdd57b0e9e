"""``ltr store``: the LTR plugin's feature stores."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..errors import UserError
from .common import StoreOpt, _ltr_conn, out, store_app


@store_app.command("init")
def store_init(ctx: typer.Context, store: StoreOpt = None):
    """Create a feature store."""
    from ..stores import store as st
    conn = _ltr_conn(ctx)
    created = st.init_store(conn, store)
    out.print(f"store {store or '(default)'} {'created' if created else 'already exists'}")


@store_app.command("drop")
def store_drop(ctx: typer.Context, store: StoreOpt = None,
               yes: Annotated[bool, typer.Option("--yes", help="Confirm: the store's feature sets and models are deleted.")] = False):
    """Delete a feature store with its feature sets and models (needs --yes)."""
    from ..stores import store as st
    from ..stores.contract_record import forget_store
    if not yes:
        raise UserError(f"dropping store {store or '(default)'} deletes its feature sets and models",
                        "pass --yes to confirm")
    conn = _ltr_conn(ctx)
    dropped = st.drop_store(conn, store)
    forget_store(conn, store)            # its models' serving contracts go with them
    out.print(f"store {store or '(default)'} {'dropped' if dropped else 'did not exist'}")


@store_app.command("list")
def store_list(ctx: typer.Context):
    """List feature stores."""
    from ..stores import store as st
    conn = _ltr_conn(ctx)
    table = Table("store", "index", "version")
    for name, meta in sorted(st.list_stores(conn).items()):
        table.add_row(name, str(meta.get("index", "")), str(meta.get("version", "")))
    out.print(table)
