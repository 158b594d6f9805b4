"""Parser 2.x on JavaScript (neo.mjs-shaped classes, CommonJS) and TypeScript (ky-shaped)."""

from neo_assets_tests.sources.parser_v2.helpers import by_name, outline, parse

NEO_BUTTON = """\
import Component from '../component/Base.mjs';
import NeoArray  from '../util/Array.mjs';

/**
 * @class Neo.button.Base
 * @extends Neo.component.Base
 */
class Button extends Component {
    /**
     * Valid values for badgePosition
     * @member {String[]} badgePositions
     * @static
     */
    static badgePositions = ['bottom-left', 'bottom-right']

    static config = {
        /**
         * @member {String} className='Neo.button.Base'
         */
        className: 'Neo.button.Base',
        ntype    : 'button',
        text_    : null
    }

    /**
     * Triggered after the text config got changed
     * @param {String|null} value
     * @protected
     */
    afterSetText(value, oldValue) {
        let me = this;

        me.update()
    }

    onClick = (data) => {
        this.fire('click', data)
    }

    static get observable() {
        return true
    }
}

export default Neo.setupClass(Button);
"""


def test_neo_class_units_names_and_lines() -> None:
    assert outline("src/button/Base.mjs", NEO_BUTTON) == [
        ("module", "src/button/Base.mjs", 1, 45),
        ("class", "Button", 4, 43),
        ("class-config", "Button.config", 16, 23),
        ("method", "Button.afterSetText", 25, 34),
        ("method", "Button.onClick", 36, 38),
        ("method", "Button.observable", 40, 42),
    ]


def test_class_keeps_its_fields_and_doc_comment_but_not_its_methods() -> None:
    button = by_name("src/button/Base.mjs", NEO_BUTTON)["Button"]
    assert button.content.startswith("/**\n * @class Neo.button.Base")
    assert "static badgePositions" in button.content
    assert "afterSetText" not in button.content
    assert "static config" not in button.content
    assert button.parent is None


def test_method_carries_its_jsdoc_and_parent() -> None:
    chunks = by_name("src/button/Base.mjs", NEO_BUTTON)
    method = chunks["Button.afterSetText"]
    assert method.content.startswith("    /**\n     * Triggered after the text config")
    assert method.parent == "Button"
    assert method.qualified_name == "Button.afterSetText"
    assert chunks["Button.config"].parent == "Button"


def test_static_get_config_is_a_class_config() -> None:
    text = "class A {\n    static get config() {\n        return {a: 1}\n    }\n}\n"
    assert ("class-config", "A.config", 2, 4) in outline("a.js", text)


def test_module_remainder_holds_imports_and_exports() -> None:
    module = by_name("src/button/Base.mjs", NEO_BUTTON)["src/button/Base.mjs"]
    assert module.content == (
        "import Component from '../component/Base.mjs';\n"
        "import NeoArray  from '../util/Array.mjs';\n\n\n"
        "export default Neo.setupClass(Button);"
    )


COMMONJS = """\
'use strict';

// Request helpers.
const api = {
    get(url) {
        return fetch(url);
    },
    post: function (url, body) {
        return fetch(url, {method: 'POST', body});
    },
    retries: 3,
};

Widget.prototype.render = function () {
    return this.el;
};

module.exports = api;
"""


def test_object_literal_methods_and_prototype_assignments() -> None:
    assert outline("lib/api.cjs", COMMONJS) == [
        ("module", "lib/api.cjs", 1, 18),
        ("method", "api.get", 5, 7),
        ("method", "api.post", 8, 10),
        ("function", "Widget.prototype.render", 14, 16),
    ]
    assert by_name("lib/api.cjs", COMMONJS)["api.get"].parent == "api"


KY = """\
import {HTTPError} from './errors/HTTPError.js';
import type {Options} from './types/options.js';

export type Hooks = {
\tbeforeRequest?: BeforeRequestHook[];
};

/**
Create a new Ky instance.
*/
export const createInstance = (defaults?: Partial<Options>): KyInstance => {
\treturn ky;
};

export class Ky {
\tstatic create(input: Input, options: Options): ResponsePromise {
\t\tconst ky = new Ky(input, options);
\t\treturn ky._fetch();
\t}

\tpublic request: Request;

\t@memoize()
\tprotected async _retry<T>(function_: () => Promise<T>): Promise<T | void> {
\t\treturn function_();
\t}

\tclass_ = class Inner {};
}

export default function ky(input: Input): ResponsePromise {
\treturn Ky.create(input, {});
}

interface Options { timeout?: number }

export enum Mode { Fast, Slow }

namespace Internal {
\texport function helper(): void {}
}
"""


def test_typescript_units() -> None:
    assert outline("source/core/Ky.ts", KY) == [
        ("module", "source/core/Ky.ts", 1, 41),
        ("type", "Hooks", 4, 6),
        ("function", "createInstance", 8, 13),
        ("class", "Ky", 15, 29),
        ("method", "Ky.create", 16, 19),
        ("method", "Ky._retry", 23, 26),
        ("function", "ky", 31, 33),
        ("class", "Options", 35, 35),
        ("class", "Mode", 37, 37),
        ("function", "Internal.helper", 40, 40),
    ]


def test_decorator_belongs_to_the_method() -> None:
    retry = by_name("source/core/Ky.ts", KY)["Ky._retry"]
    assert retry.content.startswith("\t@memoize()\n\tprotected async _retry")


def test_tsx_and_language_metadata() -> None:
    text = "export function App(): JSX.Element {\n  return <div className='x'>hi</div>;\n}\n"
    result = parse("src/App.tsx", text)
    assert result.language == "tsx"
    assert [(c.kind, c.name) for c in result.chunks] == [("function", "App")]


def test_nested_class_expression_members() -> None:
    text = "class Outer {\n  static Inner = class {\n    m() {}\n  }\n  n() {}\n}\n"
    assert ("method", "Outer.n", 5, 5) in outline("a.js", text)


def test_object_assign_methods_belong_to_the_target() -> None:
    text = (
        "let Neo = globalThis.Neo || {};\n"
        "\n"
        "Object.assign(Neo, {\n"
        "    /**\n"
        "     * @param {Object} cls\n"
        "     */\n"
        "    setupClass(cls) {\n"
        "        return cls;\n"
        "    },\n"
        "    ntype: 'neo'\n"
        "});\n"
    )
    assert outline("src/Neo.mjs", text) == [
        ("module", "src/Neo.mjs", 1, 11),
        ("method", "Neo.setupClass", 4, 9),
    ]
