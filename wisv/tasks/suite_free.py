"""The task suite's free-form instruction kinds: requests with no answer to check (describe, explain, advise, list,
summarise, rewrite, a letter, ...), each a few templates with {x} over its own topic table.  A topic is one entity:
every prompt about it goes to one pool.  Pure data and one function."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FreeKind:
    """One kind of free-form instruction."""

    templates: tuple[str, ...]  # prompts with {x} the topic
    topics: tuple[str, ...]  # the kind's entities

    def items(self) -> list[tuple[str, list[str]]]:
        """Every topic with its prompts (one per template), in table order."""
        return [(t, [tpl.format(x=t) for tpl in self.templates]) for t in self.topics]


PASSAGES = (
    ("The town council met on Monday and agreed to build a new playground next to the river. Work will start in "
     "the spring, and the playground should open before the summer holidays."),
    ("Honey never spoils if it is sealed well. Jars of honey found in ancient tombs were still safe to eat after "
     "thousands of years, because honey holds very little water and is slightly acidic."),
    ("Our bakery will close early on Friday because the ovens are being repaired. Orders placed before Thursday "
     "evening can still be picked up on Friday morning."),
    ("Many people find it hard to sleep after using a phone late at night. The bright screen and the constant "
     "messages keep the brain alert, so experts suggest putting phones away an hour before bed."),
    ("The museum's new exhibition shows tools and toys used by children two hundred years ago. Visitors can try "
     "some of the games themselves, and entry is free for school groups."),
    ("Octopuses have three hearts and blue blood. Two hearts pump blood to the gills, while the third pumps it to "
     "the rest of the body."),
    ("The train to the coast was delayed by forty minutes because of a fallen tree on the line. The railway company "
     "apologised and offered passengers a free drink."),
    ("Walking for thirty minutes a day can improve mood, help the heart and make it easier to sleep. It needs no "
     "special equipment, which makes it one of the simplest ways to stay healthy."),
    ("The library will start lending tools such as drills and ladders next month. Members can borrow a tool for up "
     "to a week, in the same way they borrow books."),
    ("Bamboo is one of the fastest-growing plants in the world. Some kinds can grow almost a meter in a single day, "
     "and it is used for buildings, furniture and even clothing."),
    ("After three years of work, volunteers finished cleaning the old canal. Boats can now travel from the harbor to "
     "the market again, and ducks have returned to the water."),
    ("Our team missed the deadline because two people were ill and the supplier sent the wrong parts. We have "
     "ordered new parts and expect to finish the project next week."),
    ("The first bicycles had no pedals. Riders pushed themselves along with their feet, and pedals were added only "
     "decades later."),
    ("A school in the village has started growing vegetables on its roof. The pupils water the plants every day, "
     "and the vegetables are used for school lunches."),
)
SENTENCES = ("hey, send me the report asap.", "we can't come to your party, sorry.",
             "the printer is broken again, somebody fix it.", "thanks a lot for the cool gift!",
             "i need my money back by friday.", "your package is late and we dunno why.",
             "can we move the meeting to tomorrow?", "the food was awful and way too pricey.",
             "we're gonna be late, traffic is crazy.", "gimme a call when you get this.",
             "the new guy is doing a great job.", "i won't be in today, feeling sick.",
             "this app keeps crashing and it's so annoying.", "let's grab lunch sometime next week.",
             "stop parking your car in front of my gate.", "the shop is out of the stuff you wanted.")

FREE_KINDS: dict[str, FreeKind] = {
    "describe_scene": FreeKind(
        ("Describe {x} in a few vivid sentences.", "Paint a picture in words of {x}."),
        ("a busy fish market at dawn", "a quiet library on a rainy afternoon", "a mountain village in winter",
         "a crowded train platform at rush hour", "a beach after a storm", "a night sky far from any city",
         "a farmer's field at harvest time", "an old bookshop", "a school playground at lunchtime",
         "a forest in autumn", "a small harbor at sunset", "a city street after midnight",
         "a kitchen before a big family dinner", "a desert at noon", "a garden in early spring",
         "a lively street festival")),
    "explain_how": FreeKind(
        ("Explain how {x}.", "Can you explain, step by step, how {x}?"),
        ("bread dough rises", "a compass finds north", "a thermostat controls the temperature of a room",
         "a vaccine trains the immune system", "an airplane's wings lift it off the ground",
         "a seed grows into a plant", "soap removes grease", "a microwave oven heats food", "a lock and key work",
         "tides rise and fall", "a camera captures a photograph", "a heat pump warms a house", "clouds produce rain",
         "a battery stores energy", "a touch screen senses a finger", "the gears on a bicycle make pedaling easier")),
    "advice": FreeKind(
        ("Give me some practical advice on {x}.", "I would like advice on {x}. What should I keep in mind?"),
        ("starting a vegetable garden", "getting better sleep", "keeping a house plant alive", "saving for a holiday",
         "learning to cook at home", "staying focused while studying", "making a long drive less tiring",
         "keeping a kitchen tidy", "running my first five-kilometer race", "choosing a first pet", "packing for a move",
         "speaking up in meetings", "reading more books", "taking better photos with a phone",
         "living on a small budget", "getting along with a new roommate")),
    "make_list": FreeKind(
        ("List five {x}.", "Make a short list of {x}."),
        ("things to pack for a weekend camping trip", "ways to reuse glass jars",
         "questions to ask when buying a used car", "indoor games for a rainy day", "snacks to bring on a long hike",
         "easy ways to save water at home", "hobbies that cost little money", "things to check before a long bike ride",
         "ideas for a child's birthday party", "ways to stay warm in winter", "items for a basic first aid kit",
         "tasks for a spring cleaning day", "skills every home cook should learn", "fruits that grow on trees",
         "things to do in a small town on a Sunday", "ways to welcome a new classmate")),
    "summarise": FreeKind(("Summarize this in one sentence: {x}", "Give a short summary of the following text. {x}"),
                          PASSAGES),
    "rewrite_formal": FreeKind(('Rewrite this sentence so that it sounds formal: "{x}"',
                                'Make this message polite and formal: "{x}"'), SENTENCES),
    "letter": FreeKind(
        ("Write a short letter to {x}.", "Write a friendly letter to {x}, in about five sentences."),
        ("your future self ten years from now", "the mayor asking for more bike lanes",
         "a pen pal describing your town", "a teacher who changed your life", "a neighbor about a barking dog",
         "a local newspaper about litter in the park", "a company praising its customer service",
         "a new student welcoming them to the school", "an author whose book you loved",
         "a landlord asking to fix the heating", "a sports club asking to join", "a friend who is feeling lonely",
         "a museum asking about a school visit", "a younger cousin starting high school")),
    "compare": FreeKind(
        ("Compare {x}.", "What are the main similarities and differences between {x}?"),
        ("tea and coffee", "trains and buses", "cats and dogs as pets", "reading a book and watching its film",
         "city life and country life", "e-books and paper books", "walking and cycling to work",
         "summer holidays and winter holidays", "cooking at home and eating out", "writing by hand and typing",
         "board games and video games", "swimming and running for fitness", "learning alone and learning in a group",
         "emails and phone calls", "markets and supermarkets")),
    "story_opening": FreeKind(
        ("Write the opening paragraph of a story about {x}.", "Begin a short story about {x}."),
        ("a lighthouse keeper who finds a message in a bottle", "a girl who can talk to birds",
         "a robot that wants to learn to paint", "a town where it never stops raining",
         "a lost dog finding its way home", "two friends who find a hidden door in their school",
         "an old clock that runs backwards", "a chef who loses her sense of taste",
         "a boy who finds a map in his grandfather's attic", "a train that leaves at midnight",
         "a village that wakes up with no colors", "a street musician with a magic violin",
         "an astronaut stranded on a quiet moon", "a cat who solves mysteries",
         "a tree that remembers everything", "a family moving into a house by the sea")),
    "recipe_outline": FreeKind(
        ("Outline a simple recipe for {x}.", "Give me a simple recipe for {x}, with the ingredients and the steps."),
        ("vegetable soup", "banana bread", "tomato pasta", "a cheese omelette", "fried rice", "guacamole",
         "chicken curry", "a fruit salad", "mashed potatoes", "lentil soup", "chocolate chip cookies",
         "a tuna sandwich", "roasted vegetables", "hummus", "porridge with apples", "a simple homemade pizza")),
    "pros_cons": FreeKind(
        ("List the pros and cons of {x}.", "Weigh the pros and cons of {x}."),
        ("working from home", "living in a big city", "owning a car", "studying abroad", "getting a dog",
         "taking a gap year", "shopping online", "giving a child a smartphone", "waking up early", "living alone",
         "buying second-hand clothes", "learning an instrument as an adult", "working part-time while studying",
         "a four-day work week", "electric scooters in cities")),
    "email": FreeKind(
        ("Write a short email to {x}.", "Draft a brief, polite email to {x}."),
        ("your manager asking for next Friday off", "a colleague asking for feedback on a draft",
         "a hotel asking to change your booking", "a customer apologizing for a late delivery",
         "a teacher explaining why your child missed school", "a friend inviting them to a picnic",
         "a plumber asking for a price for new pipes", "your team announcing a new meeting time",
         "a client confirming an appointment", "a library asking to renew a book",
         "a gym canceling your membership", "a neighbor about a parcel you received for them",
         "a conference asking how to register")),
    "how_to": FreeKind(
        ("Give step-by-step instructions for {x}.", "Walk me through {x}, one step at a time."),
        ("tying a shoelace", "planting a tomato seed", "fixing a flat bicycle tire", "making a cup of tea",
         "washing a wool sweater", "setting up a new email account", "hanging a picture on a wall",
         "cleaning a laptop keyboard", "folding a paper airplane", "making coffee with a French press",
         "backing up the photos on a phone", "packing a suitcase neatly", "repotting a house plant",
         "boiling an egg", "ironing a shirt", "writing a simple monthly budget")),
    "poem": FreeKind(
        ("Write a four-line poem about {x}.", "Write a short rhyming poem about {x}."),
        ("a cat asleep in the sun", "the first snow of winter", "the sound of rain on a roof", "an old pair of shoes",
         "a lighthouse at night", "morning coffee", "a kite in the wind", "the last day of summer",
         "a river running to the sea", "a city at night", "a grandmother's garden", "a train crossing the countryside",
         "a full moon over the sea", "a lost balloon", "a quiet Sunday morning")),
    "dialogue": FreeKind(
        ("Write a short dialogue between {x}.", "Write a conversation of about eight lines between {x}."),
        ("a customer and a baker", "a tourist and a local giving directions", "two friends planning a trip",
         "a doctor and a patient with a cold", "a teacher and a student who forgot their homework",
         "a shop assistant and someone returning a jacket", "two neighbors looking for a lost cat",
         "a job interviewer and a nervous candidate", "a waiter and a customer who got the wrong dish",
         "a parent and a child on the first day of school", "two astronauts on a space station",
         "a librarian and a reader looking for a mystery novel",
         "a taxi driver and a passenger late for a flight", "a coach and a player before a big game")),
    "persuade": FreeKind(
        ("Write a short paragraph persuading people to {x}.", "Convince me to {x}, in a few sentences."),
        ("walk more", "recycle their old batteries", "visit their local library", "learn a second language",
         "plant a tree", "drink tap water instead of bottled water", "turn off lights they are not using",
         "try cooking a new vegetable", "volunteer once a month", "read before bed instead of scrolling",
         "take the stairs", "write letters by hand", "buy food from local farmers",
         "spend an afternoon without screens", "learn basic first aid", "cycle to school")),
    "product_description": FreeKind(
        ("Write a product description for {x}.", "Write a short advert for {x}."),
        ("a waterproof hiking backpack", "a bottle that keeps drinks cold all day", "a solar-powered garden lamp",
         "a pair of noise-canceling headphones", "an alarm clock that wakes you with light",
         "a wooden puzzle for children", "a folding electric bike", "a cast-iron frying pan", "a soft wool blanket",
         "a compact travel umbrella", "a desk lamp with a phone charger", "a set of colorful gardening gloves",
         "a handmade ceramic mug", "a slow cooker", "a beginner's telescope", "a pair of running shoes")),
    "explain_child": FreeKind(
        ("Explain {x} to a seven-year-old.", "How would you explain {x} to a young child?"),
        ("why the sky is blue", "where rain comes from", "why we need to sleep", "how plants drink water",
         "why the Moon changes shape", "what electricity is", "why we brush our teeth", "how birds fly",
         "why leaves change color in autumn", "what germs are", "why the sea is salty", "what a volcano is",
         "why ice melts", "how the heart pumps blood", "what money is for", "why we have seasons")),
    "plan": FreeKind(
        ("Make a simple plan for {x}.", "Help me plan {x}, step by step."),
        ("a day trip to the seaside", "a week of healthy breakfasts", "a small birthday party at home",
         "learning to juggle in a month", "a weekend of spring cleaning", "a first visit to a new city",
         "a family movie night", "a month of saving money", "a school bake sale", "a garden on a small balcony",
         "a two-day hiking trip", "a surprise dinner for a friend", "a summer reading challenge",
         "a study schedule for final exams")),
    "review": FreeKind(
        ("Write a short review of {x}.", "Write a customer review of {x}."),
        ("a cafe with great pancakes but slow service", "a fantasy novel with a surprising ending",
         "cheap headphones that broke after a month", "a small museum about the history of trains",
         "a family hotel by a lake", "a new bakery in your neighborhood", "an action film with weak dialogue",
         "a cooking class for beginners", "a hiking trail with beautiful views", "a budget smartphone",
         "a board game for the whole family", "a pizza delivery that arrived cold", "a free concert in the park",
         "a yoga app for beginners")),
    "thank_you": FreeKind(
        ("Write a thank-you note to {x}.", "Write a short, warm note of thanks to {x}."),
        ("a neighbor who watered your plants while you were away", "a teacher at the end of the school year",
         "a friend who helped you move house", "your grandmother for a hand-knitted scarf",
         "a colleague who covered your shift", "a nurse who cared for you in hospital",
         "a host after a lovely dinner party", "a coach after a great season",
         "a stranger who returned your lost wallet", "a mentor who helped you find a job",
         "a bus driver who waited for you", "a classmate who shared their notes")),
    "ideas": FreeKind(
        ("Suggest some ideas for {x}.", "Brainstorm a few ideas for {x}."),
        ("a school science fair project", "a name for a new coffee shop", "a weekend activity with teenagers",
         "a cheap night out", "a themed dinner party", "a short film about friendship",
         "decorating a small bedroom", "a community garden event", "a gift for someone who loves cooking",
         "a fundraiser for an animal shelter", "a podcast about local history", "a rainy day with toddlers",
         "a new club at the library", "healthy lunchbox meals")),
    "news_report": FreeKind(
        ("Write a short news report about {x}.", "Write a brief news story about {x}."),
        ("a town opening its first public library", "a rare bird spotted in a city park",
         "a local school winning a robotics competition", "heavy snow closing roads in a mountain village",
         "a new bridge opening across a river", "a community garden harvesting its first crop",
         "a lost dog returning home after a month", "a bakery giving free bread to nurses",
         "a marathon raising money for a hospital", "a museum finding an old painting in its basement",
         "a power cut in a small city", "a farmer growing a giant pumpkin")),
    "difference": FreeKind(
        ("Explain the difference between {x}.", "What is the difference between {x}?"),
        ("weather and climate", "a virus and a bacterium", "a lake and a pond", "a crocodile and an alligator",
         "a hurricane and a tornado", "a frog and a toad", "an ocean and a sea", "a meteor and a meteorite",
         "speed and velocity", "a town and a city", "a simile and a metaphor", "an island and a peninsula",
         "a butterfly and a moth", "a democracy and a monarchy")),
    "speech": FreeKind(
        ("Write a short speech for {x}.", "What could I say in a short speech for {x}?"),
        ("a best friend's wedding", "the opening of a new playground", "a retirement party for a kind colleague",
         "the first day of a summer camp", "a graduation ceremony", "an award for the volunteer of the year",
         "a team that just lost a final", "a school's hundredth birthday", "a farewell to a neighbor who is moving",
         "the launch of a town recycling program", "a welcome dinner for exchange students", "a charity run")),
}
